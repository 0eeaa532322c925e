"""Which clusters a gateway serves: the ``--clusters`` file, read into ``ClusterSpec``s.

```yaml
clusters:
  - name: prod                 # a DNS label: it is used in paths
    kubeconfig: /etc/kcg/kubeconfig
    context: arn:aws:eks:eu-west-1:1234:cluster/prod
    default: true              # served at the plain paths too (else the first)
    userPrefix: ""             # prepended to the caller's name in this cluster's reviews
    groupPrefix: ""
    localRBAC: auto            # decide from its RBAC here: auto (unless a webhook), true, false
  - name: staging
    context: staging
```

A cluster's name goes into every path under ``/clusters/NAME/``, so it is a DNS-1123
label (as a namespace's): a kubeconfig context is often an ARN or a URL, and that never
appears in a path. Every mistake is said with the line it is on, and a key nobody reads
is a mistake too: a misspelt ``contxt`` would otherwise quietly serve the current context.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["LOCAL_RBAC_MODES", "ClusterSpec", "ClustersError", "check_name", "default_of", "parse_clusters",
           "read_clusters_file"]

LOCAL_RBAC_MODES = ("auto", "true", "false")
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_KEYS = {"name": "name", "kubeconfig": "kubeconfig", "context": "context", "default": "default",
         "userPrefix": "user_prefix", "groupPrefix": "group_prefix", "localRBAC": "local_rbac"}


class ClustersError(ValueError):
    """The clusters' configuration cannot be used; the message names where and why."""


@dataclass(frozen=True)
class ClusterSpec:
    """One cluster as configured. Two specs that compare equal connect the same way.

    ``server`` and ``config`` are set for a cluster from a Secret (Argo CD's shape:
    ``app.clusters.secrets``) instead of a kubeconfig.
    """

    name: str
    kubeconfig: str = ""
    context: str = ""
    default: bool = False
    user_prefix: str = ""
    group_prefix: str = ""
    local_rbac: str = ""  # auto, true, false; "": the gateway's --authz-local-rbac
    server: str = ""
    config: str = ""  # the Secret's ``config`` JSON, as text
    source: str = field(default="", compare=False)  # where it was said, for messages


def check_name(name: Any, where: str) -> str:
    """``name`` if it is a DNS-1123 label (what a path segment of ``/clusters/`` may be).

    Raises:
        ClustersError: it is not.
    """
    if not isinstance(name, str) or not name:
        raise ClustersError(f"{where}: a cluster needs a name")
    if len(name) > 63 or not _NAME.fullmatch(name):
        raise ClustersError(
            f"{where}: cluster name {name!r} is not a DNS label (at most 63 characters: lower-case "
            f"letters, digits and '-', beginning and ending with a letter or digit); it is used "
            f"in paths, so give the context a short name and set context: to the long one")
    return name


def parse_clusters(text: str, source: str, base: Path | None = None) -> list[ClusterSpec]:
    """The clusters ``text`` names (``source`` is the file's name, for messages).

    Relative ``kubeconfig`` paths are taken from ``base`` (the file's folder).

    Raises:
        ClustersError: malformed YAML, a missing or bad name, a name twice, an unknown
            key, a value of the wrong type, more than one default, or no cluster at all.
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ClustersError(f"{source}{line}: not YAML: {getattr(exc, 'problem', None) or exc}") from None
    if root is None:
        raise ClustersError(f"{source}: empty: it needs a list of clusters under 'clusters:'")
    where = lambda node: f"{source}:{node.start_mark.line + 1}"  # noqa: E731
    entries = _value_of(root, "clusters", where)
    if not isinstance(entries, yaml.SequenceNode) or not entries.value:
        raise ClustersError(f"{where(entries or root)}: 'clusters:' must be a list of at least "
                            f"one cluster")
    specs: list[ClusterSpec] = []
    seen: dict[str, str] = {}
    for node in entries.value:
        if not isinstance(node, yaml.MappingNode):
            raise ClustersError(f"{where(node)}: each cluster is a mapping (name: ..., context: ...)")
        values: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = key_node.value
            if key not in _KEYS:
                raise ClustersError(f"{where(key_node)}: unknown key {key!r} (known: "
                                    f"{', '.join(_KEYS)})")
            value = yaml.safe_load(yaml.serialize(value_node))
            wanted = bool if key == "default" else str
            if value is None and key != "name":
                continue
            if key == "localRBAC":
                if isinstance(value, bool):
                    value = "true" if value else "false"
                if value not in LOCAL_RBAC_MODES:
                    raise ClustersError(f"{where(value_node)}: localRBAC must be auto, true or "
                                        f"false")
            if not isinstance(value, wanted):
                raise ClustersError(f"{where(value_node)}: {key} must be "
                                    f"{'true or false' if wanted is bool else 'a string'}")
            values[_KEYS[key]] = value
        name = check_name(values.get("name"), where(node))
        if name in seen:
            raise ClustersError(f"{where(node)}: cluster {name!r} is named twice (first at "
                                f"{seen[name]})")
        seen[name] = where(node)
        kubeconfig = values.get("kubeconfig", "")
        if kubeconfig:
            kubeconfig = os.path.expanduser(kubeconfig)
            if base is not None and not os.path.isabs(kubeconfig):
                kubeconfig = str(base / kubeconfig)
            values["kubeconfig"] = kubeconfig
        specs.append(ClusterSpec(**values, source=where(node)))
    defaults = [s for s in specs if s.default]
    if len(defaults) > 1:
        raise ClustersError(f"{defaults[1].source}: more than one default cluster "
                            f"({', '.join(s.name for s in defaults)})")
    return specs


def _value_of(root: Any, key: str, where: Any) -> Any:
    if not isinstance(root, yaml.MappingNode):
        raise ClustersError(f"{where(root)}: the file is a mapping with a 'clusters:' list")
    found = None
    for key_node, value_node in root.value:
        if key_node.value != key:
            raise ClustersError(f"{where(key_node)}: unknown key {key_node.value!r} (the file "
                                f"has only '{key}:')")
        found = value_node
    if found is None:
        raise ClustersError(f"{where(root)}: no '{key}:' list")
    return found


def read_clusters_file(path: str) -> list[ClusterSpec]:
    """``parse_clusters`` of the file at ``path``.

    Raises:
        ClustersError: it cannot be read, or ``parse_clusters`` refuses it.
    """
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ClustersError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    return parse_clusters(text, path, Path(path).resolve().parent)


def default_of(specs: list[ClusterSpec]) -> ClusterSpec:
    """The cluster served at the plain paths: the one marked default, else the first."""
    return next((s for s in specs if s.default), specs[0])
