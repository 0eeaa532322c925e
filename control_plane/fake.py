"""An API server in memory: many resources, one resourceVersion counter, lists and watches.

``FakeCluster`` stands in for etcd + kube-apiserver where a test is about
what the gateway or an informer does with answers, not about what a real
server answers: it plugs into the informer factory's two seams
(``lister_watcher`` for ``SharedInformerFactory(lister_watcher_func=...)``
and ``fetch`` for ``Discovery(fetch=...)``), and it takes the same calls as
``KubeAPI`` (``create``, ``patch``, ``delete``, ``create_crd`` ...), so
seeding code and tests run unchanged against either.

What it keeps of the real server's behaviour, because the gateway relies on it:
one increasing resourceVersion across all resources, stamped on every write;
no new version for a write that changes nothing; ``status`` changed only
through the ``/status`` subresource where the type has one; deletion held by
finalizers (``deletionTimestamp`` set, the object stays); discovery documents
in the API server's shapes; CRDs that add and remove their resources, their
objects deleted first; watches that resume after a version and answer 410
below the compaction point. What it leaves out: admission, validation,
defaulting, pod graceful deletion, authentication and authorization.
"""

from __future__ import annotations

import bisect
import copy
import datetime as dt
import threading
import urllib.parse
import uuid
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from control_plane.kubeapi import RestVerbs
from informer_core.discovery import APIResource, Discovery, GroupVersionResource
from informer_core.errors import NotFoundError, ResourceExpiredError
from informer_core.store import object_key
from informer_core.fields import parse_field_selector
from informer_core.labels import parse_selector
from informer_core.listwatch import ListOptions, ListPage, WatchEvent, status_error

__all__ = ["BUILTIN_RESOURCES", "RBAC_RESOURCES", "FakeCluster", "ResourceType", "merge_patch"]

_ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
_CRD_GROUP = "apiextensions.k8s.io"


@dataclass(frozen=True)
class ResourceType:
    """One resource the fake serves, as discovery describes it."""

    group: str
    version: str
    name: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = _ALL_VERBS
    status_subresource: bool = True

    @property
    def gvr(self) -> GroupVersionResource:
        return GroupVersionResource(self.group, self.version, self.name)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def discovery_entry(self) -> dict:
        entry = {"name": self.name, "singularName": self.kind.lower(),
                 "namespaced": self.namespaced, "kind": self.kind, "verbs": list(self.verbs)}
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        return entry


BUILTIN_RESOURCES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "namespaces", "Namespace", False, ("ns",)),
    ResourceType("", "v1", "nodes", "Node", False, ("no",)),
    ResourceType("", "v1", "pods", "Pod", True, ("po",)),
    ResourceType("", "v1", "configmaps", "ConfigMap", True, ("cm",), status_subresource=False),
    ResourceType("", "v1", "secrets", "Secret", True, status_subresource=False),
    ResourceType("", "v1", "services", "Service", True, ("svc",)),
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True, ("sa",),
                 status_subresource=False),
    ResourceType("", "v1", "bindings", "Binding", True, verbs=("create",)),
    ResourceType("apps", "v1", "deployments", "Deployment", True, ("deploy",)),
    ResourceType(_CRD_GROUP, "v1", "customresourcedefinitions", "CustomResourceDefinition",
                 False, ("crd", "crds")),
)


_RBAC_GROUP = "rbac.authorization.k8s.io"
# Served by a fake that is to hold RBAC (``FakeCluster(BUILTIN_RESOURCES + RBAC_RESOURCES)``).
RBAC_RESOURCES: tuple[ResourceType, ...] = (
    ResourceType(_RBAC_GROUP, "v1", "roles", "Role", True, status_subresource=False),
    ResourceType(_RBAC_GROUP, "v1", "clusterroles", "ClusterRole", False,
                 status_subresource=False),
    ResourceType(_RBAC_GROUP, "v1", "rolebindings", "RoleBinding", True,
                 status_subresource=False),
    ResourceType(_RBAC_GROUP, "v1", "clusterrolebindings", "ClusterRoleBinding", False,
                 status_subresource=False),
)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def _fail(code: int, reason: str, message: str) -> Exception:
    return status_error(code, _status(code, reason, message), message)


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply a JSON merge patch (RFC 7386); neither argument is changed."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


@dataclass(frozen=True)
class _Path:
    type: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


class FakeCluster(RestVerbs):
    """An in-memory API server; thread-safe. See the module docstring."""

    def __init__(self, resources: Iterable[ResourceType] = BUILTIN_RESOURCES) -> None:
        self._cond = threading.Condition()  # guards everything below
        self._types: dict[GroupVersionResource, ResourceType] = {r.gvr: r for r in resources}
        self._objects: dict[GroupVersionResource, dict[str, dict]] = {g: {} for g in self._types}
        self._history: list[tuple[int, GroupVersionResource, str, dict]] = []
        self._rv = 0
        self._compacted = 0
        self._watches_open = threading.Event()
        self._watches_open.set()
        self._watches: weakref.WeakSet[_FakeWatch] = weakref.WeakSet()
        self.list_calls = 0

    # -- faults --------------------------------------------------------------------

    def compact(self) -> int:
        """Forget history: watches from any version before now answer 410."""
        with self._cond:
            self._compacted = self._rv
            return self._rv

    def end_watches(self) -> int:
        """End every open watch (an API server restart); return how many were ended."""
        with self._cond:
            ended = [w for w in self._watches if not w._stopped]
            for watch in ended:
                watch._stopped = True
            self._cond.notify_all()
            return len(ended)

    def pause_watches(self) -> None:
        """Hold every watch's next event until ``resume_watches`` (a lagging watch)."""
        self._watches_open.clear()

    def resume_watches(self) -> None:
        self._watches_open.set()
        with self._cond:
            self._cond.notify_all()

    @property
    def resource_version(self) -> int:
        with self._cond:
            return self._rv

    # -- the REST verbs (KubeAPI's calls) ----------------------------------------------

    def request(self, method: str, path: str, body: Any = None,
                content_type: str = "application/json", ok_missing: bool = False) -> Any:
        try:
            return self._request(method, path, copy.deepcopy(body))
        except NotFoundError:
            if ok_missing:
                return None
            raise

    def _request(self, method: str, path: str, body: Any) -> Any:
        raw_path, _, query = path.partition("?")
        with self._cond:
            doc = self._discovery_doc(raw_path.rstrip("/")) if method == "GET" else None
        if doc is not None:
            return doc
        target = self._parse(raw_path)
        with self._cond:
            if method == "GET":
                if target.name is None:
                    return self._list_doc(target, urllib.parse.parse_qs(query))
                return copy.deepcopy(self._get_locked(target))
            if method == "POST" and target.name is None:
                return copy.deepcopy(self._create_locked(target, body))
            if method == "PATCH" and target.name is not None:
                return copy.deepcopy(self._patch_locked(target, body))
            if method == "PUT" and target.name is not None:
                return copy.deepcopy(self._put_locked(target, body))
            if method == "DELETE" and target.name is not None:
                return copy.deepcopy(self._delete_locked(target))
        raise _fail(405, "MethodNotAllowed", f"{method} is not supported on {path}")

    def _parse(self, path: str) -> _Path:
        segments = [urllib.parse.unquote(s) for s in path.strip("/").split("/")]
        if segments[:1] == ["api"] and len(segments) >= 3:
            group, version, rest = "", segments[1], segments[2:]
        elif segments[:1] == ["apis"] and len(segments) >= 4:
            group, version, rest = segments[1], segments[2], segments[3:]
        else:
            raise _fail(404, "NotFound", f"the server could not find the requested resource ({path})")
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        found = self._types.get(GroupVersionResource(group, version, rest[0]))
        if found is None or (namespace is not None and not found.namespaced):
            raise _fail(404, "NotFound", f"the server could not find the requested resource ({path})")
        name = rest[1] if len(rest) > 1 else None
        subresource = rest[2] if len(rest) > 2 else None
        return _Path(found, namespace, name, subresource)

    def _store(self, type_: ResourceType) -> dict[str, dict]:
        return self._objects.setdefault(type_.gvr, {})

    def _get_locked(self, target: _Path) -> dict:
        found = self._store(target.type).get(object_key(target.namespace, target.name or ""))
        if found is None:
            raise _fail(404, "NotFound", f'{target.type.name} "{target.name}" not found')
        return found

    def _list_doc(self, target: _Path, query: dict[str, list[str]]) -> dict:
        labels = parse_selector((query.get("labelSelector") or [""])[0])
        fields = parse_field_selector((query.get("fieldSelector") or [""])[0])
        items = [copy.deepcopy(o) for k, o in sorted(self._store(target.type).items())
                 if (target.namespace is None or o["metadata"].get("namespace") == target.namespace)
                 and labels.matches(o["metadata"].get("labels")) and fields.matches(o)]
        return {"apiVersion": target.type.api_version, "kind": f"{target.type.kind}List",
                "metadata": {"resourceVersion": str(self._rv)}, "items": items}

    def _record_locked(self, type_: ResourceType, event: str, obj: dict) -> dict:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self._history.append((self._rv, type_.gvr, event, copy.deepcopy(obj)))
        self._cond.notify_all()
        return obj

    def _create_locked(self, target: _Path, body: dict) -> dict:
        type_ = target.type
        meta = body.setdefault("metadata", {})
        name = meta.get("name") or (meta.get("generateName", "") + uuid.uuid4().hex[:5]
                                    if meta.get("generateName") else "")
        if not name:
            raise _fail(422, "Invalid", f"{type_.kind} is invalid: metadata.name: Required value")
        key = object_key(target.namespace if type_.namespaced else None, name)
        store = self._store(type_)
        if key in store:
            raise _fail(409, "AlreadyExists", f'{type_.name} "{name}" already exists')
        body["apiVersion"], body["kind"] = type_.api_version, type_.kind
        meta.update(name=name, uid=str(uuid.uuid4()), creationTimestamp=_now())
        meta.pop("resourceVersion", None)
        if type_.namespaced:
            meta["namespace"] = target.namespace or "default"
        if type_.kind == "Namespace":
            body["status"] = {"phase": "Active"}
        if type_.kind == "CustomResourceDefinition":
            self._establish_locked(body)
        store[key] = body
        return self._record_locked(type_, "ADDED", body)

    def _establish_locked(self, crd: dict) -> None:
        spec = crd["spec"]
        names = spec["names"]
        for version in spec.get("versions") or []:
            if not version.get("served", True):
                continue
            type_ = ResourceType(spec["group"], version["name"], names["plural"], names["kind"],
                                 spec.get("scope") == "Namespaced",
                                 tuple(names.get("shortNames") or ()),
                                 status_subresource="status" in (version.get("subresources") or {}))
            self._types[type_.gvr] = type_
            self._objects.setdefault(type_.gvr, {})
        crd["status"] = {"acceptedNames": names, "storedVersions": [
            v["name"] for v in spec.get("versions") or [] if v.get("storage")], "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts"},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted"}]}

    def _write_locked(self, target: _Path, new: dict) -> dict:
        """Store ``new`` as the object's next state; no version when nothing changed."""
        store = self._store(target.type)
        key = object_key(target.namespace, target.name or "")
        old = store[key]
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:
            return old
        store[key] = new
        return self._record_locked(target.type, "MODIFIED", new)

    def _patch_locked(self, target: _Path, patch: dict) -> dict:
        old = self._get_locked(target)
        if target.subresource == "status":
            patch = {"status": (patch or {}).get("status")}
        elif target.subresource is not None:
            raise _fail(404, "NotFound", f"no subresource {target.subresource}")
        elif target.type.status_subresource:
            patch = {k: v for k, v in (patch or {}).items() if k != "status"}
        new = merge_patch(old, patch)
        for fixed in ("name", "namespace", "uid", "creationTimestamp"):
            if fixed in old["metadata"]:
                new["metadata"][fixed] = old["metadata"][fixed]
        return self._write_locked(target, new)

    def _put_locked(self, target: _Path, body: dict) -> dict:
        old = self._get_locked(target)
        sent = (body.get("metadata") or {}).get("resourceVersion")
        if sent and sent != old["metadata"]["resourceVersion"]:
            raise _fail(409, "Conflict", f'Operation cannot be fulfilled on {target.type.name} '
                                         f'"{target.name}": the object has been modified')
        new = dict(body, apiVersion=old["apiVersion"], kind=old["kind"])
        new["metadata"] = dict(body.get("metadata") or {}, **{
            k: old["metadata"][k] for k in ("name", "namespace", "uid", "creationTimestamp")
            if k in old["metadata"]})
        if target.type.status_subresource:
            new["status"] = old.get("status")
            if new["status"] is None:
                del new["status"]
        return self._write_locked(target, new)

    def _delete_locked(self, target: _Path) -> dict:
        old = self._get_locked(target)
        if old["metadata"].get("finalizers"):
            if old["metadata"].get("deletionTimestamp"):
                return old
            new = copy.deepcopy(old)
            new["metadata"].update(deletionTimestamp=_now(), deletionGracePeriodSeconds=0)
            return self._write_locked(target, new)
        if target.type.kind == "CustomResourceDefinition":
            self._remove_crd_locked(old)
        del self._store(target.type)[object_key(target.namespace, target.name or "")]
        gone = copy.deepcopy(old)
        self._record_locked(target.type, "DELETED", gone)
        return gone

    def _remove_crd_locked(self, crd: dict) -> None:
        spec = crd["spec"]
        for version in spec.get("versions") or []:
            gvr = GroupVersionResource(spec["group"], version["name"], spec["names"]["plural"])
            type_ = self._types.get(gvr)
            if type_ is None:
                continue
            for key, obj in sorted(self._objects.get(gvr, {}).items()):
                self._record_locked(type_, "DELETED", copy.deepcopy(obj))
            self._objects.pop(gvr, None)
            del self._types[gvr]

    # -- discovery (Discovery(fetch=...)) -------------------------------------------------

    def fetch(self, path: str, timeout: float = 30.0) -> tuple[int, Any]:
        """GET ``path`` as discovery does: (status, document)."""
        try:
            return 200, self.get(path)
        except Exception as exc:  # noqa: BLE001 - every failure is an answer here
            code = getattr(exc, "code", 500) or 500
            return code, getattr(exc, "status", None)

    def discovery(self, **kwargs: Any) -> Discovery:
        """A ``Discovery`` over this fake (for ``SharedInformerFactory(discovery=...)``)."""
        return Discovery(fetch=self.fetch, **kwargs)

    def _discovery_doc(self, path: str) -> dict | None:
        groups: dict[str, list[str]] = {}
        for type_ in self._types.values():
            versions = groups.setdefault(type_.group, [])
            if type_.version not in versions:
                versions.append(type_.version)
        if path == "/version":
            return {"major": "1", "minor": "20", "gitVersion": "v1.20.2-fake",
                    "platform": "linux/amd64"}
        if path == "/api":
            return {"kind": "APIVersions", "versions": groups.get("", []),
                    "serverAddressByClientCIDRs": []}
        if path == "/apis":
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                 "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}}
                for g, vs in groups.items() if g]}
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) == 2:
            group, version = "", parts[1]
        elif parts[0] == "apis" and len(parts) == 3:
            group, version = parts[1], parts[2]
        else:
            return None
        resources = [t.discovery_entry() for t in self._types.values()
                     if t.group == group and t.version == version]
        if not resources:
            return None
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version, "resources": resources}

    # -- lists and watches (SharedInformerFactory(lister_watcher_func=...)) ------------------

    def lister_watcher(self, resource: APIResource, namespace: str | None = None) -> _FakeListerWatcher:
        """The ``ListerWatcher`` of one resource (in one namespace, or all)."""
        return _FakeListerWatcher(self, resource.gvr, namespace or None)


class _FakeListerWatcher:
    def __init__(self, cluster: FakeCluster, gvr: GroupVersionResource, namespace: str | None) -> None:
        self._cluster = cluster
        self._gvr = gvr
        self._namespace = namespace

    def _served_locked(self) -> ResourceType:
        type_ = self._cluster._types.get(self._gvr)
        if type_ is None:
            raise _fail(404, "NotFound", f"the server could not find the requested resource ({self._gvr})")
        return type_

    def matches(self, obj: dict, options: ListOptions) -> bool:
        meta = obj["metadata"]
        if self._namespace is not None and meta.get("namespace") != self._namespace:
            return False
        if options.label_selector and not parse_selector(options.label_selector).matches(meta.get("labels")):
            return False
        return not options.field_selector or parse_field_selector(options.field_selector).matches(obj)

    def list(self, options: ListOptions) -> ListPage:
        cluster = self._cluster
        with cluster._cond:
            cluster.list_calls += 1
            self._served_locked()
            items = [o for _, o in sorted(cluster._objects.get(self._gvr, {}).items())
                     if self.matches(o, options)]
            rv = str(cluster._rv)
        start = int(options.continue_token.partition(":")[0]) if options.continue_token else 0
        if options.continue_token:
            rv = options.continue_token.partition(":")[2]
        token = ""
        if options.limit and options.resource_version != "0" and len(items) > start + options.limit:
            token = f"{start + options.limit}:{rv}"
            items = items[start:start + options.limit]
        else:
            items = items[start:]
        return ListPage([copy.deepcopy(o) for o in items], rv, token)

    def watch(self, options: ListOptions) -> _FakeWatch:
        cluster = self._cluster
        with cluster._cond:
            self._served_locked()
            since = int(options.resource_version or cluster._rv)
            if since < cluster._compacted:
                raise ResourceExpiredError(f"too old resource version: {since} ({cluster._compacted})",
                                           code=410, reason="Expired")
            watch = _FakeWatch(self, replace(options), since)
            cluster._watches.add(watch)
            return watch


class _FakeWatch:
    """Events of one resource after a version, live until stopped or the resource goes."""

    def __init__(self, source: _FakeListerWatcher, options: ListOptions, since: int) -> None:
        self._source = source
        self._options = options
        self._since = since
        self._stopped = False

    def stop(self) -> None:
        cluster = self._source._cluster
        with cluster._cond:
            self._stopped = True
            cluster._cond.notify_all()

    def __iter__(self) -> Iterator[WatchEvent]:
        cluster = self._source._cluster
        while True:
            with cluster._cond:
                while True:
                    if self._stopped:
                        return
                    event = self._next_locked() if cluster._watches_open.is_set() else None
                    if event is not None:
                        break
                    if self._source._gvr not in cluster._types:
                        return  # its CRD was deleted: the server ends the watch
                    cluster._cond.wait(0.5)
            yield event

    def _next_locked(self) -> WatchEvent | None:
        cluster = self._source._cluster
        history = cluster._history
        for i in range(bisect.bisect_right(history, self._since, key=lambda e: e[0]), len(history)):
            rv, gvr, type_, obj = history[i]
            self._since = rv
            if gvr == self._source._gvr and self._source.matches(obj, self._options):
                return WatchEvent(type_, copy.deepcopy(obj))
        return None
