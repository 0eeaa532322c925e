{{/* The chart's name, or nameOverride. */}}
{{- define "kcg.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' name: release-chart, shortened to the release name when it already holds the chart's. */}}
{{- define "kcg.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kcg.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kcg.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kcg.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kcg.labels" -}}
helm.sh/chart: {{ include "kcg.chart" . }}
{{ include "kcg.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: gateway
app.kubernetes.io/part-of: kube-cache-gateway
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "kcg.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kcg.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kcg.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* http or https, as the gateway serves. */}}
{{/* The Secret holding the serving certificate: named, or the one cert-manager writes. */}}
{{- define "kcg.tlsSecret" -}}
{{- .Values.tls.secretName | default (printf "%s-tls" (include "kcg.fullname" .)) }}
{{- end }}

{{- define "kcg.scheme" -}}
{{- if .Values.tls.enabled }}https{{ else }}http{{ end }}
{{- end }}

{{/* Settings the chart cannot render into a working gateway fail here, with the reason. */}}
{{- define "kcg.validate" -}}
{{- if and (eq .Values.authz.mode "none") (not .Values.authz.allowAnonymous) }}
{{- fail "authz.mode=none lets anyone who reaches the Service read what the gateway's ServiceAccount can: set authz.allowAnonymous=true to accept that (and consider networkPolicy.enabled), or keep authz.mode=kubernetes" }}
{{- end }}
{{- if and .Values.tls.enabled (not .Values.tls.secretName) (not .Values.tls.certManager.enabled) }}
{{- fail "tls.enabled needs tls.secretName (a kubernetes.io/tls Secret in the release's namespace) or tls.certManager.enabled" }}
{{- end }}
{{- if and .Values.tls.enabled .Values.tls.certManager.enabled (not .Values.tls.certManager.issuerRef.name) }}
{{- fail "tls.certManager.enabled needs tls.certManager.issuerRef.name: the Issuer or ClusterIssuer that signs the certificate" }}
{{- end }}
{{- range .Values.clusters.list }}
{{- if and .context (not $.Values.clusters.kubeconfigSecret) }}
{{- fail (printf "clusters.list: cluster %s names a context: set clusters.kubeconfigSecret to the Secret holding its kubeconfig" .name) }}
{{- end }}
{{- end }}
{{- if and .Values.clusters.fromSecrets (not .Values.clusters.list) (eq .Values.authz.mode "kubernetes") (not .Values.clusters.authnCluster) }}
{{- fail "clusters.fromSecrets without clusters.list needs clusters.authnCluster: the cluster whose API server reviews callers' tokens is the operator's choice, never whichever Secret comes first" }}
{{- end }}
{{- if and (or .Values.clusters.secretCommands .Values.clusters.secretAllow .Values.clusters.secretsNamespace) (not .Values.clusters.fromSecrets) }}
{{- fail "clusters.secretsNamespace, secretCommands and secretAllow need clusters.fromSecrets" }}
{{- end }}
{{- if and .Values.clusters.fromSecrets (not (has "secrets" .Values.policy.deny)) }}
{{- fail "clusters.fromSecrets needs secrets in policy.deny: the cluster Secrets hold the gateway's credentials to its clusters and must never be served" }}
{{- end }}
{{- if and .Values.history.enabled .Values.history.persistence.enabled (not .Values.history.url) (or .Values.autoscaling.enabled (gt (int .Values.replicas) 1)) }}
{{- fail "history.persistence keeps one replica's SQLite file on a ReadWriteOnce claim: with several replicas, share a PostgreSQL store (history.url)" }}
{{- end }}
{{- if and .Values.history.passwordSecret.name (not .Values.history.url) }}
{{- fail "history.passwordSecret is the PostgreSQL store's password: it needs history.url" }}
{{- end }}
{{- if and .Values.history.url (not (hasPrefix "postgresql://" .Values.history.url)) (not (hasPrefix "postgres://" .Values.history.url)) }}
{{- fail "history.url names a PostgreSQL store (postgresql://USER@HOST:PORT/DB); leave it empty for SQLite on the pod's volume" }}
{{- end }}
{{- if and .Values.history.url (regexMatch "://[^/@]*:[^/@]*@" .Values.history.url) }}
{{- fail "history.url must not hold a password (it would be in the pod's spec for anyone who may read Deployments): put it in a Secret and name it in history.passwordSecret" }}
{{- end }}
{{- if and .Values.autoscaling.enabled (gt (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) }}
{{- fail "autoscaling.minReplicas must not exceed autoscaling.maxReplicas" }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (eq .Values.authz.mode "kubernetes") (not .Values.metrics.serviceMonitor.tokenSecret) (not .Values.rbac.metricsReader) }}
{{- fail "metrics.serviceMonitor.enabled makes a scraper bound to the metrics-reader ClusterRole: keep rbac.metricsReader, or name metrics.serviceMonitor.tokenSecret" }}
{{- end }}
{{- if lt (int .Values.terminationGracePeriodSeconds) (add (int .Values.preStopDelaySeconds) 12) }}
{{- fail (printf "terminationGracePeriodSeconds must be at least preStopDelaySeconds + 12 (%d): after the delay the gateway ends its streams with their last words and waits up to 10 s for answers under way" (add (int .Values.preStopDelaySeconds) 12)) }}
{{- end }}
{{- end }}
