"""Table columns and cells, as kube-apiserver 1.20's own printers make them.

kubectl prints what the server's ``Table`` says, so to print the same rows
through the gateway these mirror the server's printers for the common kinds;
every other resource gets Name and Age, and a custom resource its CRD's
``additionalPrinterColumns``. The server always fills the wide (priority 1)
columns; kubectl shows them with ``-o wide``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Any

from informer_core.fields import go_string

__all__ = ["Column", "DEFAULT_PRINTER", "PRINTERS", "Row", "crd_columns", "human_duration", "since"]

Column = dict[str, Any]
Row = tuple[list[Any], list[dict[str, Any]] | None]  # cells, row conditions

_NAME_DESC = ("Name must be unique within a namespace. Is required when creating resources, "
              "although some resources may allow a client to request the generation of an "
              "appropriate name automatically. Name is primarily intended for creation "
              "idempotence and configuration definition. Cannot be updated. More info: "
              "http://kubernetes.io/docs/user-guide/identifiers#names")
_AGE_DESC = ("CreationTimestamp is a timestamp representing the server time when this object "
             "was created. It is not guaranteed to be set in happens-before order across "
             "separate operations. Clients may not set this value. It is represented in "
             "RFC3339 form and is in UTC.")


def col(name: str, type_: str = "string", priority: int = 0, fmt: str = "",
        description: str = "") -> Column:
    return {"name": name, "type": type_, "format": fmt, "description": description,
            "priority": priority}


NAME = col("Name", fmt="name", description=_NAME_DESC)
AGE = col("Age", description=_AGE_DESC)


def human_duration(seconds: float) -> str:
    """Format a duration as apimachinery's ``HumanDuration``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rem = s % 60
        return f"{minutes}m" if rem == 0 else f"{minutes}m{rem}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rem = minutes % 60
        return f"{hours}h" if rem == 0 else f"{hours}h{rem}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rem = hours % 24
        return f"{hours // 24}d" if rem == 0 else f"{hours // 24}d{rem}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def parse_time(text: Any) -> dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def since(text: Any, now: dt.datetime) -> str:
    """Age of an RFC 3339 timestamp, or ``<unknown>``."""
    when = parse_time(text)
    if when is None:
        return "<unknown>"
    return human_duration((now - when).total_seconds())


def _get(obj: Any, *path: str, default: Any = None) -> Any:
    for part in path:
        if not isinstance(obj, dict):
            return default
        obj = obj.get(part)
        if obj is None:
            return default
    return obj


def _format_labels(labels: dict[str, str] | None) -> str:
    if not labels:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _format_label_selector(selector: dict | None) -> str:
    """metav1.FormatLabelSelector: ``<none>`` for none, ``<none>`` for an empty one too."""
    if selector is None:
        return "<none>"
    text = _label_selector_string(selector)
    return "<none>" if text == "" else text


def _label_selector_string(selector: dict | None) -> str:
    """metav1.LabelSelectorAsSelector(...).String(): requirements sorted by key."""
    if not selector:
        return ""
    reqs: list[tuple[str, str]] = []
    for key, value in (selector.get("matchLabels") or {}).items():
        reqs.append((key, f"{key}={value}"))
    for expr in selector.get("matchExpressions") or []:
        key, op = expr.get("key", ""), expr.get("operator", "")
        values = sorted(set(expr.get("values") or []))
        if op == "In":
            reqs.append((key, f"{key} in ({','.join(values)})"))
        elif op == "NotIn":
            reqs.append((key, f"{key} notin ({','.join(values)})"))
        elif op == "Exists":
            reqs.append((key, key))
        elif op == "DoesNotExist":
            reqs.append((key, f"!{key}"))
    reqs.sort(key=lambda r: r[0])
    return ",".join(r[1] for r in reqs)


def _containers(template_spec: dict | None) -> tuple[str, str]:
    containers = _get(template_spec or {}, "containers", default=[]) or []
    return (",".join(c.get("name", "") for c in containers),
            ",".join(c.get("image", "") for c in containers))


# -- per kind -------------------------------------------------------------------------

POD_COLUMNS = [
    NAME, col("Ready", description="The aggregate readiness state of this pod for accepting traffic."),
    col("Status", description="The aggregate status of the containers in this pod."),
    col("Restarts", "integer", description="The number of times the containers in this pod have been restarted."),
    AGE, col("IP", priority=1, description="IP address allocated to the pod."),
    col("Node", priority=1, description="NodeName is a request to schedule this pod onto a specific node."),
    col("Nominated Node", priority=1, description="nominatedNodeName is set only when this pod preempts other pods on the node."),
    col("Readiness Gates", priority=1, description="If specified, all readiness gates will be evaluated for pod readiness."),
]

_POD_SUCCEEDED = [{"type": "Completed", "status": "True", "reason": "Succeeded",
                   "message": "The pod has completed successfully."}]
_POD_FAILED = [{"type": "Completed", "status": "True", "reason": "Failed",
                "message": "The pod failed."}]


def pod_row(pod: dict, now: dt.datetime) -> Row:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    restarts, ready = 0, 0
    total = len(spec.get("containers") or [])
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    conditions = _POD_SUCCEEDED if phase == "Succeeded" else _POD_FAILED if phase == "Failed" else None
    initializing = False
    init_specs = spec.get("initContainers") or []
    for i, container in enumerate(status.get("initContainerStatuses") or []):
        restarts += int(container.get("restartCount") or 0)
        state = container.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and int(terminated.get("exitCode") or 0) == 0:
            continue
        if terminated is not None:
            if not terminated.get("reason"):
                if terminated.get("signal"):
                    reason = f"Init:Signal:{terminated['signal']}"
                else:
                    reason = f"Init:ExitCode:{terminated.get('exitCode', 0)}"
            else:
                reason = "Init:" + terminated["reason"]
        elif waiting is not None and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break
    if not initializing:
        restarts = 0
        has_running = False
        for container in reversed(status.get("containerStatuses") or []):
            restarts += int(container.get("restartCount") or 0)
            state = container.get("state") or {}
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated is not None and terminated.get("reason"):
                reason = terminated["reason"]
            elif terminated is not None:
                if terminated.get("signal"):
                    reason = f"Signal:{terminated['signal']}"
                else:
                    reason = f"ExitCode:{terminated.get('exitCode', 0)}"
            elif container.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            ready_condition = any(c.get("type") == "Ready" and c.get("status") == "True"
                                  for c in status.get("conditions") or [])
            reason = "Running" if ready_condition else "NotReady"
    deleting = _get(pod, "metadata", "deletionTimestamp") is not None
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting:
        reason = "Terminating"
    pod_ips = status.get("podIPs") or []
    pod_ip = (pod_ips[0].get("ip") if pod_ips else "") or "<none>"
    gates = spec.get("readinessGates") or []
    gates_text = "<none>"
    if gates:
        true = 0
        for gate in gates:
            for condition in status.get("conditions") or []:
                if condition.get("type") == gate.get("conditionType"):
                    if condition.get("status") == "True":
                        true += 1
                    break
        gates_text = f"{true}/{len(gates)}"
    cells = [_get(pod, "metadata", "name", default=""), f"{ready}/{total}", reason, restarts,
             since(_get(pod, "metadata", "creationTimestamp"), now), pod_ip,
             spec.get("nodeName") or "<none>", status.get("nominatedNodeName") or "<none>",
             gates_text]
    return cells, conditions


DEPLOYMENT_COLUMNS = [
    NAME, col("Ready", description="Number of the pod with ready state"),
    col("Up-to-date", description="Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
    col("Available", description="Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
    AGE, col("Containers", priority=1, description="Names of each container in the template."),
    col("Images", priority=1, description="Images referenced by each container in the template."),
    col("Selector", priority=1, description="Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment."),
]


def deployment_row(obj: dict, now: dt.datetime) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    names, images = _containers(_get(spec, "template", "spec"))
    desired = spec.get("replicas", 0) or 0
    return [obj["metadata"]["name"], f"{status.get('readyReplicas', 0) or 0}/{desired}",
            status.get("updatedReplicas", 0) or 0, status.get("availableReplicas", 0) or 0,
            since(_get(obj, "metadata", "creationTimestamp"), now), names, images,
            _label_selector_string(spec.get("selector"))], None


REPLICASET_COLUMNS = [
    NAME, col("Desired", "integer", description="Replicas is the number of desired replicas."),
    col("Current", "integer", description="Replicas is the most recently oberved number of replicas."),
    col("Ready", "integer", description="The number of ready replicas for this replica set."),
    AGE, col("Containers", priority=1, description="Names of each container in the template."),
    col("Images", priority=1, description="Images referenced by each container in the template."),
    col("Selector", priority=1, description="Selector is a label query over pods that should match the replica count."),
]


def replicaset_row(obj: dict, now: dt.datetime) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    names, images = _containers(_get(spec, "template", "spec"))
    return [obj["metadata"]["name"], spec.get("replicas", 0) or 0, status.get("replicas", 0) or 0,
            status.get("readyReplicas", 0) or 0,
            since(_get(obj, "metadata", "creationTimestamp"), now), names, images,
            _format_label_selector(spec.get("selector"))], None


STATEFULSET_COLUMNS = [
    NAME, col("Ready", description="Number of the pod with ready state"), AGE,
    col("Containers", priority=1, description="Names of each container in the template."),
    col("Images", priority=1, description="Images referenced by each container in the template."),
]


def statefulset_row(obj: dict, now: dt.datetime) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    names, images = _containers(_get(spec, "template", "spec"))
    return [obj["metadata"]["name"],
            f"{status.get('readyReplicas', 0) or 0}/{spec.get('replicas', 0) or 0}",
            since(_get(obj, "metadata", "creationTimestamp"), now), names, images], None


DAEMONSET_COLUMNS = [
    NAME, col("Desired", "integer", description="The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod)."),
    col("Current", "integer", description="The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod."),
    col("Ready", "integer", description="The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready."),
    col("Up-to-date", "integer", description="The total number of nodes that are running updated daemon pod"),
    col("Available", "integer", description="The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)"),
    col("Node Selector", description="NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node."),
    AGE, col("Containers", priority=1, description="Names of each container in the template."),
    col("Images", priority=1, description="Images referenced by each container in the template."),
    col("Selector", priority=1, description="A label query over pods that are managed by the daemon set."),
]


def daemonset_row(obj: dict, now: dt.datetime) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    template_spec = _get(spec, "template", "spec") or {}
    names, images = _containers(template_spec)
    return [obj["metadata"]["name"], status.get("desiredNumberScheduled", 0) or 0,
            status.get("currentNumberScheduled", 0) or 0, status.get("numberReady", 0) or 0,
            status.get("updatedNumberScheduled", 0) or 0, status.get("numberAvailable", 0) or 0,
            _format_labels(template_spec.get("nodeSelector")),
            since(_get(obj, "metadata", "creationTimestamp"), now), names, images,
            _format_label_selector(spec.get("selector"))], None


SERVICE_COLUMNS = [
    NAME, col("Type", description="type determines how the Service is exposed."),
    col("Cluster-IP", description="clusterIP is the IP address of the service and is usually assigned randomly by the master."),
    col("External-IP", description="externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service."),
    col("Port(s)", description="The list of ports that are exposed by this service."),
    AGE, col("Selector", priority=1, description="Route service traffic to pods with label keys and values matching this selector."),
]


def _service_external_ip(svc: dict) -> str:
    spec = svc.get("spec") or {}
    external = spec.get("externalIPs") or []
    kind = spec.get("type") or ""
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) if external else "<none>"
    if kind == "LoadBalancer":
        ingress = _get(svc, "status", "loadBalancer", "ingress", default=[]) or []
        lb = [i.get("ip") or i.get("hostname") or "" for i in ingress]
        lb = [x for x in lb if x]
        if external:
            return ",".join(lb + external)
        return ",".join(lb) if lb else "<pending>"
    if kind == "ExternalName":
        return spec.get("externalName") or ""
    return "<unknown>"


def service_row(obj: dict, now: dt.datetime) -> Row:
    spec = obj.get("spec") or {}
    cluster_ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    ports = []
    for port in spec.get("ports") or []:
        piece = f"{port.get('port')}/{port.get('protocol', 'TCP')}"
        if port.get("nodePort"):
            piece = f"{port.get('port')}:{port['nodePort']}/{port.get('protocol', 'TCP')}"
        ports.append(piece)
    return [obj["metadata"]["name"], spec.get("type") or "", cluster_ips[0] if cluster_ips else "<none>",
            _service_external_ip(obj), ",".join(ports) or "<none>",
            since(_get(obj, "metadata", "creationTimestamp"), now),
            _format_labels(spec.get("selector"))], None


NAMESPACE_COLUMNS = [NAME, col("Status", description="The status of the namespace"), AGE]


def namespace_row(obj: dict, now: dt.datetime) -> Row:
    return [obj["metadata"]["name"], _get(obj, "status", "phase", default=""),
            since(_get(obj, "metadata", "creationTimestamp"), now)], None


NODE_COLUMNS = [
    NAME, col("Status", description="The status of the node"),
    col("Roles", description="The roles of the node"), AGE,
    col("Version", description="Kubelet Version reported by the node."),
    col("Internal-IP", priority=1, description="List of addresses reachable to the node."),
    col("External-IP", priority=1, description="List of addresses reachable to the node."),
    col("OS-Image", priority=1, description="OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy))."),
    col("Kernel-Version", priority=1, description="Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."),
    col("Container-Runtime", priority=1, description="ContainerRuntime Version reported by the node through runtime remote API (e.g. docker://1.5.0)."),
]


def node_row(obj: dict, now: dt.datetime) -> Row:
    status, labels = obj.get("status") or {}, _get(obj, "metadata", "labels", default={}) or {}
    states = []
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            states = ["Ready" if condition.get("status") == "True" else "NotReady"]
    states = states or ["Unknown"]
    if _get(obj, "spec", "unschedulable"):
        states.append("SchedulingDisabled")
    roles = set()
    for key, value in labels.items():
        if key.startswith("node-role.kubernetes.io/"):
            role = key[len("node-role.kubernetes.io/"):]
            if role:
                roles.add(role)
        elif key == "kubernetes.io/role" and value:
            roles.add(value)

    def address(kind: str) -> str:
        for item in status.get("addresses") or []:
            if item.get("type") == kind:
                return item.get("address", "")
        return "<none>"

    info = status.get("nodeInfo") or {}
    return [obj["metadata"]["name"], ",".join(states), ",".join(sorted(roles)) or "<none>",
            since(_get(obj, "metadata", "creationTimestamp"), now), info.get("kubeletVersion", ""),
            address("InternalIP"), address("ExternalIP"), info.get("osImage") or "<unknown>",
            info.get("kernelVersion") or "<unknown>",
            info.get("containerRuntimeVersion") or "<unknown>"], None


CONFIGMAP_COLUMNS = [NAME, col("Data", description="Data contains the configuration data."), AGE]


def configmap_row(obj: dict, now: dt.datetime) -> Row:
    count = len(obj.get("data") or {}) + len(obj.get("binaryData") or {})
    return [obj["metadata"]["name"], count,
            since(_get(obj, "metadata", "creationTimestamp"), now)], None


JOB_COLUMNS = [
    NAME, col("Completions", description="The desired number of successfully finished pods the job should be run with."),
    col("Duration", description="Time required to complete the job."), AGE,
    col("Containers", priority=1, description="Names of each container in the template."),
    col("Images", priority=1, description="Images referenced by each container in the template."),
    col("Selector", priority=1, description="A label query over pods that should match the pod count."),
]


def job_row(obj: dict, now: dt.datetime) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    succeeded = status.get("succeeded", 0) or 0
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    else:
        parallelism = spec.get("parallelism") or 0
        completions = f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"
    started, finished = parse_time(status.get("startTime")), parse_time(status.get("completionTime"))
    duration = ""
    if started is not None:
        duration = human_duration(((finished or now) - started).total_seconds())
    names, images = _containers(_get(spec, "template", "spec"))
    return [obj["metadata"]["name"], completions, duration,
            since(_get(obj, "metadata", "creationTimestamp"), now), names, images,
            _format_label_selector(spec.get("selector"))], None


EVENT_COLUMNS = [
    col("Last Seen", description="The time at which the most recent occurrence of this event was recorded."),
    col("Type", description="Type of this event (Normal, Warning), new types could be added in the future"),
    col("Reason", description="This should be a short, machine understandable string that gives the reason for the transition into the object's current status."),
    col("Object", description="The object that this event is about."),
    col("Subobject", priority=1, description="If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]."),
    col("Source", priority=1, description="The component reporting this event. Should be a short machine understandable string."),
    col("Message", description="A human-readable description of the status of this operation."),
    col("First Seen", priority=1, description="The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)"),
    col("Count", priority=1, description="The number of times this event has occurred."),
    col("Name", priority=1, fmt="name", description=_NAME_DESC),
]


def event_row(obj: dict, now: dt.datetime) -> Row:
    first = since(obj.get("firstTimestamp"), now) if obj.get("firstTimestamp") else since(obj.get("eventTime"), now)
    last = since(obj.get("lastTimestamp"), now) if obj.get("lastTimestamp") else first
    count = obj.get("count") or 0
    series = obj.get("series")
    if series:
        last = since(series.get("lastObservedTime"), now)
        count = (series.get("count") or 0) + 1
    elif count == 0:
        count = 1
    involved = obj.get("involvedObject") or {}
    kind = (involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = obj.get("source") or {}
    component = source.get("component") or obj.get("reportingComponent") or ""
    instance = source.get("host") or obj.get("reportingInstance") or ""
    source_text = f"{component}, {instance}" if instance else component
    return [last, obj.get("type", ""), obj.get("reason", ""), target,
            involved.get("fieldPath", ""), source_text, (obj.get("message") or "").strip(),
            first, count, obj["metadata"]["name"]], None


def default_row(obj: dict, now: dt.datetime) -> Row:
    return [_get(obj, "metadata", "name", default=""),
            since(_get(obj, "metadata", "creationTimestamp"), now)], None


PRINTERS: dict[tuple[str, str], tuple[list[Column], Callable[[dict, dt.datetime], Row]]] = {
    ("", "pods"): (POD_COLUMNS, pod_row),
    ("apps", "deployments"): (DEPLOYMENT_COLUMNS, deployment_row),
    ("apps", "replicasets"): (REPLICASET_COLUMNS, replicaset_row),
    ("apps", "statefulsets"): (STATEFULSET_COLUMNS, statefulset_row),
    ("apps", "daemonsets"): (DAEMONSET_COLUMNS, daemonset_row),
    ("", "services"): (SERVICE_COLUMNS, service_row),
    ("", "namespaces"): (NAMESPACE_COLUMNS, namespace_row),
    ("", "nodes"): (NODE_COLUMNS, node_row),
    ("", "configmaps"): (CONFIGMAP_COLUMNS, configmap_row),
    ("batch", "jobs"): (JOB_COLUMNS, job_row),
    ("", "events"): (EVENT_COLUMNS, event_row),
}
DEFAULT_PRINTER = ([NAME, AGE], default_row)


# -- custom resources ------------------------------------------------------------------

_SEGMENT = re.compile(r"""\.([A-Za-z0-9_\-/]+)|\[(\d+|\*)\]|\[\?\(@\.([A-Za-z0-9_.\-]+)\s*==\s*["']([^"']*)["']\)\]""")


def jsonpath_first(obj: Any, path: str) -> Any:
    """Evaluate a simple JSONPath (``.a.b``, ``[0]``, ``[*]``, ``[?(@.k=="v")]``); first result."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    if path.startswith("$"):
        path = path[1:]
    nodes = [obj]
    pos = 0
    while pos < len(path):
        match = _SEGMENT.match(path, pos)
        if match is None:
            return None
        pos = match.end()
        key, index, filter_key, filter_value = match.groups()
        nxt = []
        for node in nodes:
            if key is not None and isinstance(node, dict) and key in node:
                nxt.append(node[key])
            elif index is not None and isinstance(node, list):
                if index == "*":
                    nxt.extend(node)
                elif int(index) < len(node):
                    nxt.append(node[int(index)])
            elif filter_key is not None and isinstance(node, list):
                for item in node:
                    if go_string(jsonpath_first(item, "." + filter_key)) == filter_value:
                        nxt.append(item)
        nodes = nxt
        if not nodes:
            return None
    return nodes[0] if nodes else None


def crd_columns(printer_columns: list[dict]) -> tuple[list[Column], Callable[[dict, dt.datetime], Row]]:
    """Columns and a row function from a CRD version's ``additionalPrinterColumns``."""
    if not printer_columns:
        printer_columns = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    columns = [NAME] + [
        col(c.get("name", ""), c.get("type", "string"), int(c.get("priority") or 0), c.get("format", ""),
            c.get("description") or
            f"Custom resource definition column (in JSONPath format): {c.get('jsonPath', '')}")
        for c in printer_columns]

    def row(obj: dict, now: dt.datetime) -> Row:
        cells: list[Any] = [_get(obj, "metadata", "name", default="")]
        for column in printer_columns:
            value = jsonpath_first(obj, column.get("jsonPath", ""))
            cells.append(_cell(column.get("type", "string"), value, now))
        return cells, None

    return columns, row


def _cell(kind: str, value: Any, now: dt.datetime) -> Any:
    if value is None:
        return None
    if kind == "string":
        if isinstance(value, str):
            return value
        return go_string(value)
    if kind == "integer":
        if isinstance(value, bool):
            return None
        if isinstance(value, (int, float)):
            return int(value)
        return None
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return float(value)
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    if kind == "date":
        if isinstance(value, str):
            when = parse_time(value)
            return "<invalid>" if when is None else human_duration((now - when).total_seconds())
        return None
    return None
