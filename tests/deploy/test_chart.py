"""The Helm chart: every variant lints, renders to objects valid for Kubernetes' schemas, and is
accepted by the real API server; bad values fail the render with a message that says why."""

from __future__ import annotations

import dataclasses
import json

import kubernetes_validate
import pytest
import yaml

from app.settings import Settings
from tests.deploy.conftest import (CHART, OPERATOR_APIS, OPERATOR_CRDS, VARIANTS, by_kind,
                                   kubectl, objects_of, render, variant_values)

# The oldest and newest Kubernetes the bundled schemas describe; the chart claims >= 1.20
# (the real API server below checks that end).
SCHEMA_VERSIONS = ("1.25.0", kubernetes_validate.latest_version())
_SETTINGS = {f"KCG_{f.name.upper()}" for f in dataclasses.fields(Settings)}


@pytest.mark.parametrize("kube_version", ["v1.20.2", "v1.35.0"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_each_variant_lints_clean(variant, kube_version):
    """``helm lint --strict`` (Helm 4): a warning fails it, as an error does."""
    report = render.lint(variant_values(variant), kube_version=kube_version)
    assert "0 chart(s) failed" in report, report


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_each_variant_renders_objects_valid_for_kubernetes(variant, version):
    objs = objects_of(variant_values(variant), kube_version=f"v{version}",
                      api_versions=OPERATOR_APIS)
    assert objs
    for obj in objs:
        if obj["apiVersion"].startswith(("monitoring.coreos.com/", "cert-manager.io/")):
            continue  # a CRD's kind: checked by the API server below, with its CRD installed
        kubernetes_validate.validate(obj, version, strict=True)


def test_the_default_objects_are_the_expected_set():
    kinds = sorted(o["kind"] for o in objects_of())
    assert kinds == sorted(["ServiceAccount", "ClusterRole", "ClusterRole", "ClusterRole",
                            "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding",
                            "ClusterRoleBinding", "ClusterRoleBinding", "RoleBinding", "Deployment", "Service", "PodDisruptionBudget",
                            "NetworkPolicy"])
    full = {o["kind"] for o in objects_of(variant_values("full-values.yaml"))}
    assert {"Ingress", "ServiceMonitor", "PrometheusRule", "HorizontalPodAutoscaler",
            "NetworkPolicy"} <= full


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_cluster_role_reads_only_and_leaves_secrets_out(variant):
    objs = objects_of(variant_values(variant))
    for role in by_kind(objs, "ClusterRole"):
        for rule in role["rules"]:
            if "nonResourceURLs" in rule:  # get /metrics; get the token issuer's public keys
                assert rule in ({"nonResourceURLs": ["/metrics"], "verbs": ["get"]}, {
                    "nonResourceURLs": ["/.well-known/openid-configuration", "/openid/v1/jwks"],
                    "verbs": ["get"]})
                continue
            assert sorted(rule["verbs"]) == ["get", "list", "watch"]
            assert "secrets" not in rule["resources"] and "*" not in rule["resources"]
    bindings = {b["roleRef"]["name"] for b in by_kind(objs, "ClusterRoleBinding")}
    authorizing = variant_values(variant).get("authz", {}).get("mode", "kubernetes") == "kubernetes"
    delegating = authorizing and variant_values(variant).get("rbac", {}).get("create", True)
    assert ("system:auth-delegator" in bindings) == delegating
    # the cluster's RBAC, followed to decide callers' accesses: read only, the four kinds only
    local = delegating and str(variant_values(variant).get("authz", {}).get(
        "localRBAC", "auto")) != "false"
    readers = [r for r in by_kind(objs, "ClusterRole") if r["metadata"]["name"].endswith(
        ":rbac-reader")]
    assert len(readers) == (1 if local else 0)
    if readers:
        assert readers[0]["rules"] == [{
            "apiGroups": ["rbac.authorization.k8s.io"],
            "resources": ["roles", "clusterroles", "rolebindings", "clusterrolebindings"],
            "verbs": ["get", "list", "watch"]}]
        assert any(b["roleRef"]["name"] == readers[0]["metadata"]["name"]
                   for b in by_kind(objs, "ClusterRoleBinding"))
    # callers' ServiceAccount tokens checked here: the keys, and the objects tokens are bound to
    verifying = delegating and variant_values(variant).get("authz", {}).get("localTokens", True)
    verifiers = [r for r in by_kind(objs, "ClusterRole") if r["metadata"]["name"].endswith(
        ":token-verifier")]
    assert len(verifiers) == (1 if verifying else 0)
    if verifiers:
        assert verifiers[0]["rules"][0] == {"apiGroups": [""], "verbs": ["get", "list", "watch"],
                                            "resources": ["serviceaccounts", "pods", "nodes"]}
        assert any(b["roleRef"]["name"] == verifiers[0]["metadata"]["name"]
                   for b in by_kind(objs, "ClusterRoleBinding"))
    # the client CAs callers' certificates are checked against, read where the API server
    # writes them, with the Role every delegated authenticator is bound to
    readers = [b for b in by_kind(objs, "RoleBinding")
               if b["roleRef"]["name"] == "extension-apiserver-authentication-reader"]
    assert len(readers) == (1 if delegating else 0)
    if readers:
        assert readers[0]["metadata"]["namespace"] == "kube-system"
        assert readers[0]["roleRef"]["kind"] == "Role"


def test_the_resources_come_from_the_values():
    values = {"rbac": {"resources": [{"apiGroups": ["stable.example.com"],
                                      "resources": ["widgets"]}]}}
    role = by_kind(objects_of(values), "ClusterRole")[0]
    assert role["rules"] == [{"apiGroups": ["stable.example.com"], "resources": ["widgets"],
                              "verbs": ["get", "list", "watch"]}]


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_pod_is_hardened_and_probed(variant):
    (deployment,) = by_kind(objects_of(variant_values(variant)), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert container["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert container["resources"]["requests"]
    assert pod["topologySpreadConstraints"]
    # a rollout: out of the endpoints first, then the streams' last words, within the grace
    assert container["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "5"]
    assert pod["terminationGracePeriodSeconds"] >= 5 + 12


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_environment_variable_is_a_gateway_setting(variant):
    (deployment,) = by_kind(objects_of(variant_values(variant)), "Deployment")
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    names = [e["name"] for e in env]
    assert set(names) <= _SETTINGS, set(names) - _SETTINGS
    assert len(names) == len(set(names))


def test_values_become_the_gateways_settings():
    values = variant_values("full-values.yaml")
    (deployment,) = by_kind(objects_of(values), "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["KCG_AUTHZ"] == "kubernetes"
    assert env["KCG_PREWARM"] == "pods,deployments.apps"
    assert env["KCG_METADATA_ONLY"] == "events"
    assert env["KCG_CORS_ORIGINS"] == "https://dashboard.example.com"
    assert env["KCG_NAMESPACE_PARTITIONED_LISTS"] == "true"
    assert env["KCG_AUTHZ_DENY_CACHE_TTL"] == "10"
    assert env["KCG_TLS_CERT_FILE"] == "/etc/kube-cache-gateway/tls/tls.crt"
    assert env["KCG_EVENT_RING_SIZE"] == "20000"
    assert container["args"] == ["--sync-timeout=30"]
    assert container["image"].endswith("@" + values["image"]["digest"])
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert "replicas" not in deployment["spec"]  # the autoscaler owns it


def test_history_is_a_file_on_the_pods_volume_or_a_shared_store_with_its_password_kept_apart():
    (deployment,) = by_kind(objects_of({"history": {"enabled": True, "maxBytes": "512Mi"}}),
                            "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["KCG_HISTORY"] == "sqlite:////var/lib/kube-cache-gateway/history.db"
    assert env["KCG_HISTORY_RETENTION"] == "24h" and env["KCG_HISTORY_MAX_BYTES"] == "512Mi"
    assert {"name": "history", "mountPath": "/var/lib/kube-cache-gateway"} in \
        pod["containers"][0]["volumeMounts"]
    assert {"name": "history", "emptyDir": {"sizeLimit": "1Gi"}} in pod["volumes"]
    kept = objects_of({"replicas": 1, "history": {"enabled": True, "persistence": {"enabled": True}}})
    (claim,) = by_kind(kept, "PersistentVolumeClaim")
    assert claim["spec"]["resources"]["requests"]["storage"] == "2Gi"
    (deployment,) = by_kind(kept, "Deployment")
    assert {"name": "history", "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}} \
        in deployment["spec"]["template"]["spec"]["volumes"]
    shared = objects_of({"replicas": 3, "history": {
        "enabled": True, "url": "postgresql://kcg@db:5432/kcg", "passwordSecret": {"name": "pg"}}})
    (deployment,) = by_kind(shared, "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["KCG_HISTORY"] == "postgresql://kcg@db:5432/kcg"
    # the password a file from the Secret, never in the pod's spec or its environment
    assert env["KCG_HISTORY_PASSWORD_FILE"] == "/etc/kube-cache-gateway/history/password"
    assert {"name": "history-password", "secret": {"secretName": "pg", "items": [
        {"key": "password", "path": "password"}]}} in deployment["spec"]["template"]["spec"]["volumes"]
    assert not by_kind(shared, "PersistentVolumeClaim")
    assert all(m["name"] != "history" for m in container["volumeMounts"])
    assert not by_kind(objects_of({}), "PersistentVolumeClaim")


def test_api_versions_follow_the_cluster():
    old = objects_of({"autoscaling": {"enabled": True}}, kube_version="v1.20.2")
    new = objects_of({"autoscaling": {"enabled": True}}, kube_version="v1.30.0")
    assert by_kind(old, "PodDisruptionBudget")[0]["apiVersion"] == "policy/v1beta1"
    assert by_kind(new, "PodDisruptionBudget")[0]["apiVersion"] == "policy/v1"
    assert by_kind(old, "HorizontalPodAutoscaler")[0]["apiVersion"] == "autoscaling/v2beta2"
    assert by_kind(new, "HorizontalPodAutoscaler")[0]["apiVersion"] == "autoscaling/v2"


@pytest.mark.parametrize("values, says", [
    ({"replicas": 0}, "/replicas"),
    ({"replica": 3}, "additional properties 'replica' not allowed"),
    ({"authz": {"mode": "maybe"}}, "/authz/mode"),
    ({"authz": {"cacheTTL": 0}}, "/authz/cacheTTL"),
    ({"cors": ["dashboard.example.com"]}, "/cors/0"),
    ({"prewarm": ["Pods!"]}, "/prewarm/0"),
    ({"extraEnv": {"PATH": "/x"}}, "'PATH' does not match pattern '^KCG_"),
    ({"image": {"digest": "latest"}}, "/image/digest"),
    ({"service": {"port": 70000}}, "/service/port"),
    ({"workers": 0}, "/workers"),
    ({"workers": "all"}, "/workers"),
    ({"rbac": {"resources": [{"apiGroups": [""]}]}}, "missing property 'resources'"),
])
def test_values_against_the_schema_fail_the_render(values, says):
    with pytest.raises(render.HelmError) as failed:
        render.render_chart(values)
    assert says in str(failed.value)


@pytest.mark.parametrize("values, says", [
    ({"authz": {"mode": "none"}}, "set authz.allowAnonymous=true"),
    ({"tls": {"enabled": True}}, "tls.enabled needs tls.secretName"),
    ({"tls": {"enabled": True, "certManager": {"enabled": True}}}, "issuerRef.name"),
    ({"serviceAccount": {"create": False}}, "serviceAccount.name"),
    ({"autoscaling": {"enabled": True, "minReplicas": 5, "maxReplicas": 2}}, "minReplicas"),
    ({"preStopDelaySeconds": 20, "terminationGracePeriodSeconds": 30}, "at least preStopDelaySeconds + 12 (32)"),
    ({"metrics": {"serviceMonitor": {"enabled": True}}, "rbac": {"metricsReader": False}},
     "keep rbac.metricsReader"),
    ({"history": {"enabled": True, "persistence": {"enabled": True}}, "replicas": 3},
     "share a PostgreSQL store"),
    ({"history": {"enabled": True, "passwordSecret": {"name": "pg"}}}, "it needs history.url"),
    ({"history": {"enabled": True, "url": "postgresql://kcg:hunter2@db/kcg"}},
     "must not hold a password"),
])
def test_settings_that_cannot_work_fail_the_render_saying_why(values, says):
    with pytest.raises(render.HelmError) as failed:
        render.render_chart(values)
    assert says in str(failed.value)


def test_the_notes_say_how_to_reach_it_and_a_curl_to_try():
    notes = render.render_chart(notes=True)["kube-cache-gateway/templates/NOTES.txt"]
    assert "kubectl -n kube-cache-gateway port-forward svc/kube-cache-gateway 8080:8080" in notes
    assert 'curl -s -H "Authorization: Bearer $TOKEN"' in notes
    anonymous = render.render_chart(variant_values("authz-none-values.yaml"), notes=True)
    assert "NOT authorized" in anonymous["kube-cache-gateway/templates/NOTES.txt"]


def _paths(values: dict, schema: dict, prefix: str = "") -> tuple[set[str], set[str]]:
    """The dotted keys of ``values`` and of ``schema``'s properties, as deep as the schema
    describes objects by their properties (free-form maps end a path)."""
    in_values, in_schema = set(), set()
    properties = schema.get("properties") or {}
    for key in properties:
        in_schema.add(prefix + key)
    for key, value in values.items():
        in_values.add(prefix + key)
        described = properties.get(key) or {}
        if isinstance(value, dict) and described.get("properties"):
            more_values, more_schema = _paths(value, described, f"{prefix}{key}.")
            in_values |= more_values
            in_schema |= more_schema
    return in_values, in_schema


def test_every_value_is_in_the_schema_and_the_readme():
    """values.yaml and values.schema.json name the same keys, at every depth the schema
    describes; every value is in the chart's README."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    readme = (CHART / "README.md").read_text()
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    in_values, in_schema = _paths(defaults, schema)
    assert in_values == in_schema, {"only in values.yaml": sorted(in_values - in_schema),
                                    "only in the schema": sorted(in_schema - in_values)}
    missing = [key for key in sorted(in_values)
               if f"`{key}" not in readme and f"`{key.rsplit('.', 1)[-1]}`" not in readme
               and f"`{key.rpartition('.')[0]}" not in readme]
    assert not missing, f"not in helm/kube-cache-gateway/README.md: {missing}"


# -- on the real API server -------------------------------------------------------------------

@pytest.fixture(scope="module")
def release_namespace(local_cluster):
    from control_plane.kubeapi import KubeAPI

    kube = KubeAPI.for_cluster(local_cluster)
    kube.ensure_namespace("kube-cache-gateway")
    for definition in OPERATOR_CRDS:
        if kube.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                    + definition["metadata"]["name"], ok_missing=True) is None:
            kube.create_crd(definition)
    return "kube-cache-gateway"


def dry_run(local_cluster, objs: list[dict]) -> str:
    """``kubectl apply --dry-run=server`` of ``objs``: the API server admits them, or the test fails."""
    text = "".join("---\n" + json.dumps(o) + "\n" for o in objs)
    return kubectl(f"--kubeconfig={local_cluster.kubeconfig}", "apply", "--dry-run=server",
                   "-f", "-", input_text=text)


@pytest.mark.cluster
@pytest.mark.parametrize("variant", VARIANTS)
def test_each_variant_is_accepted_by_the_api_server(local_cluster, release_namespace,
                                                     server_version, variant):
    objs = objects_of(variant_values(variant), kube_version=server_version,
                      api_versions=OPERATOR_APIS)
    out = dry_run(local_cluster, objs)
    assert out.count("(server dry run)") == len(objs), out


def test_clusters_become_a_followed_file_and_secrets_a_role_in_the_release_namespace():
    from app.clusters.config import parse_clusters

    objs = objects_of(variant_values("clusters-values.yaml"))
    (config,) = by_kind(objs, "ConfigMap")
    specs = parse_clusters(config["data"]["clusters.yaml"], "configmap")
    assert [(s.name, s.context, s.default) for s in specs] == [
        ("home", "", True), ("prod", "arn:aws:eks:eu-west-1:123456789012:cluster/prod", False),
        ("staging", "staging", False)]
    assert specs[0].kubeconfig == "", "no context: the cluster it runs in"
    assert specs[1].kubeconfig == "/etc/kube-cache-gateway/kubeconfig/kubeconfig"
    assert (specs[1].user_prefix, specs[1].group_prefix) == ("oidc:", "oidc:")
    (deployment,) = by_kind(objs, "Deployment")
    env = {e["name"]: e.get("value") for e in
           deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["KCG_CLUSTERS"] == "/etc/kube-cache-gateway/clusters/clusters.yaml"
    assert (env["KCG_CLUSTER_SECRETS"], env["KCG_AUTHN_CLUSTER"]) == ("true", "home")
    assert env["KCG_CLUSTER_SECRETS_NAMESPACE"] == "kube-cache-gateway"
    assert env["KCG_CLUSTER_SECRET_COMMANDS"] == "argocd-k8s-auth"
    assert "KCG_CLUSTER_SECRET_ALLOW" not in env, "nothing else allowed unless named"
    (role,) = by_kind(objs, "Role")
    assert role["metadata"]["namespace"] == "kube-cache-gateway"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"],
                              "verbs": ["get", "list", "watch"]}]
    assert not by_kind(objects_of(), "Role"), "no Secret is readable by default"


def test_cluster_secrets_in_a_namespace_of_their_own_are_the_only_secrets_readable():
    objs = objects_of({"clusters": {"fromSecrets": True, "authnCluster": "prod",
                                    "secretsNamespace": "kcg-clusters",
                                    "secretAllow": ["proxy-url"]}})
    roles = by_kind(objs, "Role") + [  # (the client CAs' reader reads one ConfigMap only)
        b for b in by_kind(objs, "RoleBinding")
        if b["roleRef"]["name"] != "extension-apiserver-authentication-reader"]
    assert {o["metadata"]["namespace"] for o in roles} == {"kcg-clusters"}
    (deployment,) = by_kind(objs, "Deployment")
    env = {e["name"]: e.get("value") for e in
           deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["KCG_CLUSTER_SECRETS_NAMESPACE"] == "kcg-clusters"
    assert env["KCG_CLUSTER_SECRET_ALLOW"] == "proxy-url"


@pytest.mark.parametrize("values, says", [
    ({"clusters": {"list": [{"name": "prod", "context": "prod"}]}}, "clusters.kubeconfigSecret"),
    ({"clusters": {"fromSecrets": True, "authnCluster": "x"}, "policy": {"deny": []}},
     "secrets in policy.deny"),
    ({"clusters": {"fromSecrets": True}}, "needs clusters.authnCluster"),
    ({"clusters": {"secretCommands": ["aws"]}}, "need clusters.fromSecrets"),
])
def test_clusters_that_cannot_work_fail_the_render_saying_why(values, says):
    with pytest.raises(render.HelmError) as failed:
        render.render_chart(values)
    assert says in str(failed.value)


def test_a_cluster_name_that_is_not_a_dns_label_fails_the_schema():
    with pytest.raises(render.HelmError):
        render.render_chart({"clusters": {"list": [{"name": "arn:aws:eks:x"}]}})


@pytest.mark.cluster
def test_a_release_installs_upgrades_and_uninstalls_for_real(local_cluster):
    """helm install, upgrade and uninstall (Helm 4) against the API server: a real release."""
    import subprocess

    from control_plane.kubeapi import KubeAPI

    kube = KubeAPI.for_cluster(local_cluster)
    release, namespace = "kcg-real", "kcg-helm-real"
    selector = f"labelSelector=app.kubernetes.io/instance%3D{release}"
    helm = [render.helm(), f"--kubeconfig={local_cluster.kubeconfig}", "--namespace", namespace]

    def run(*args: str) -> str:
        done = subprocess.run([*helm, *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def ours() -> dict[str, list[str]]:
        found = {}
        for path in (f"/apis/apps/v1/namespaces/{namespace}/deployments",
                     f"/api/v1/namespaces/{namespace}/services",
                     f"/api/v1/namespaces/{namespace}/serviceaccounts",
                     "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                     "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"):
            names = [o["metadata"]["name"] for o in kube.get(f"{path}?{selector}")["items"]]
            if names:
                found[path.rsplit("/", 1)[1]] = names
        return found

    try:
        run("install", release, str(CHART), "--create-namespace")
        installed = ours()
        assert set(installed) == {"deployments", "services", "serviceaccounts", "clusterroles",
                                  "clusterrolebindings"}, installed
        path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{installed['deployments'][0]}"
        before = kube.get(path)
        run("upgrade", release, str(CHART), "--reuse-values", "--set", "podAnnotations.rolled=yes")
        after = kube.get(path)
        assert after["metadata"]["generation"] > before["metadata"]["generation"]
        assert after["spec"]["template"]["metadata"]["annotations"] == {"rolled": "yes"}
        assert json.loads(run("status", release, "-o", "json"))["version"] == 2
    finally:
        subprocess.run([*helm, "uninstall", release, "--wait"], capture_output=True, timeout=120)
    assert ours() == {}, "nothing of the release left behind"


def test_cert_manager_issues_the_serving_certificate_for_the_services_names():
    objs = objects_of(variant_values("cert-manager-values.yaml"))
    (certificate,) = by_kind(objs, "Certificate")
    (deployment,) = by_kind(objs, "Deployment")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == certificate["spec"]["secretName"] \
        == "kube-cache-gateway-tls"
    assert "kube-cache-gateway.kube-cache-gateway.svc" in certificate["spec"]["dnsNames"]
    assert certificate["spec"]["issuerRef"] == {"name": "cluster-ca", "kind": "ClusterIssuer",
                                               "group": "cert-manager.io"}


def test_the_service_monitor_sends_a_token_allowed_to_read_metrics_never_a_token_file():
    objs = objects_of(variant_values("full-values.yaml"))
    (monitor,) = by_kind(objs, "ServiceMonitor")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert "bearerTokenFile" not in endpoint
    secret = endpoint["authorization"]["credentials"]
    (token,) = [s for s in by_kind(objs, "Secret") if s["metadata"]["name"] == secret["name"]]
    assert token["type"] == "kubernetes.io/service-account-token" and secret["key"] == "token"
    scraper = token["metadata"]["annotations"]["kubernetes.io/service-account.name"]
    (binding,) = [b for b in by_kind(objs, "ClusterRoleBinding")
                  if b["roleRef"]["name"].endswith(":metrics-reader")]
    assert binding["subjects"][0]["name"] == scraper
    named = objects_of({**variant_values("full-values.yaml"), "metrics": {"serviceMonitor": {
        "enabled": True, "tokenSecret": "prometheus-token"}}})
    (monitor,) = by_kind(named, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["authorization"]["credentials"]["name"] == \
        "prometheus-token"
    assert not by_kind(named, "Secret"), "a Secret named: the chart makes none"


def test_a_helm_test_pod_only_when_asked_for():
    assert not by_kind(objects_of(), "Pod"), "off by default"
    (pod,) = by_kind(objects_of({"tests": {"enabled": True}}), "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert pod["metadata"]["labels"]["kube-cache-gateway.io/client"] == "true"
    script = pod["spec"]["containers"][0]["command"][2]
    assert "http://kube-cache-gateway.kube-cache-gateway.svc:8080/readyz" in script
    assert pod["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_network_policy_admits_labelled_clients_and_the_peers_named_never_everyone():
    (default,) = by_kind(objects_of(), "NetworkPolicy")
    (rule,) = default["spec"]["ingress"]
    assert rule["from"] == [{"namespaceSelector": {}, "podSelector": {"matchLabels": {
        "kube-cache-gateway.io/client": "true"}}}]
    assert {"namespaceSelector": {}} not in rule["from"], "not every pod in the cluster"
    (fenced,) = by_kind(objects_of(variant_values("authz-none-values.yaml")), "NetworkPolicy")
    assert fenced["spec"]["ingress"][0]["from"][1] == {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "dashboards"}}}
    assert not by_kind(objects_of({"networkPolicy": {"enabled": False}}), "NetworkPolicy")
