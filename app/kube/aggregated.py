"""Aggregated discovery: every group, version and resource in one document per root.

API servers since 1.26 answer ``/api`` and ``/apis`` with an ``APIGroupDiscoveryList``
(``apidiscovery.k8s.io`` ``v2``, before 1.30 ``v2beta1``) when a client asks for it in
``Accept``, so a current kubectl learns every resource in two requests instead of one per
group version (44 with an empty cache, against a 1.20 API server or a gateway without
this). The gateway builds the documents from the legacy ones it already holds (the
API server's own resource lists: resources, verbs, short names, categories, scope and
subresources exactly as it lists them), so they work whatever the API server's version.

A client that asks for them knows one by its ``Content-Type`` (``application/json;g=
apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList``); anything else it takes for the
legacy document. Built once per discovery refresh, with an ``ETag`` (clients send
``If-None-Match`` and cache them).
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

__all__ = ["AggregatedDocuments", "aggregated_version"]

_GROUP = "apidiscovery.k8s.io"
_VERSIONS = ("v2", "v2beta1")  # newest first: the one a client lists first wins among equals


def aggregated_version(accept: str | None) -> str | None:
    """The ``apidiscovery.k8s.io`` version an ``Accept`` header asks for first (``v2``,
    ``v2beta1``), or ``None`` when it asks for the legacy documents first."""
    for part in (accept or "").split(","):
        fields = [f.strip() for f in part.split(";")]
        media = fields[0].lower()
        params = dict(f.split("=", 1) for f in fields[1:] if "=" in f)
        if params.get("q") == "0":
            continue
        if media in ("application/json", "*/*", "application/*") and params.get("g") == _GROUP \
                and params.get("v") in _VERSIONS and params.get("as") == "APIGroupDiscoveryList":
            return params["v"]
        if media in ("application/json", "*/*", "application/*") and "g" not in params:
            return None  # the legacy document is asked for before any aggregated one
    return None


class AggregatedDocuments:
    """The aggregated documents of one discovery view, built once and kept with it."""

    def __init__(self) -> None:
        self._view: tuple[Any, ...] = ()  # the legacy documents they were built from
        self._built: dict[tuple[str, str], tuple[bytes, str]] = {}

    def document(self, discovery: Any, root: str, version: str) -> tuple[bytes, str, str]:
        """The ``root`` (``api`` or ``apis``) document in ``version``: its bytes, ETag and
        Content-Type."""
        view = (discovery.api_versions_doc, discovery.api_groups_doc, discovery.resource_lists)
        if len(self._view) != 3 or any(a is not b for a, b in zip(view, self._view)):
            self._view, self._built = view, {}  # a refresh replaced the documents
        key = (root, version)
        if key not in self._built:
            body = orjson.dumps(_build(discovery, root, version))
            self._built[key] = body, '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'
        body, etag = self._built[key]
        return body, etag, f"application/json;g={_GROUP};v={version};as=APIGroupDiscoveryList"


def _build(discovery: Any, root: str, version: str) -> dict[str, Any]:
    lists = discovery.resource_lists
    groups: list[tuple[str, list[str]]] = []
    if root == "api":
        groups.append(("", [v for v in discovery.api_versions_doc.get("versions") or []]))
    else:
        for group in discovery.api_groups_doc.get("groups") or []:
            versions = [v.get("version") for v in group.get("versions") or [] if v.get("version")]
            preferred = (group.get("preferredVersion") or {}).get("version")
            if preferred in versions:  # the preferred version first, then as listed
                versions.remove(preferred)
                versions.insert(0, preferred)
            groups.append((group.get("name", ""), versions))
    items = []
    for name, versions in groups:
        entries = []
        for v in versions:
            listed = lists.get(f"{name}/{v}" if name else v)
            if listed is None:
                entries.append({"version": v, "resources": [], "freshness": "Stale"})
                continue
            entries.append({"version": v, "resources": _resources(name, v, listed),
                            "freshness": "Current"})
        items.append({"metadata": {"name": name, "creationTimestamp": None},
                      "versions": entries})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": f"{_GROUP}/{version}",
            "metadata": {}, "items": items}


def _kind(entry: dict[str, Any], group: str, version: str) -> dict[str, str]:
    """The kind an entry answers with (a subresource's may be of another group: Scale)."""
    return {"group": entry.get("group", group), "version": entry.get("version", version),
            "kind": entry.get("kind", "")}


def _resources(group: str, version: str, listed: dict[str, Any]) -> list[dict[str, Any]]:
    """A legacy ``APIResourceList``'s entries as aggregated resources, subresources nested."""
    resources: dict[str, dict[str, Any]] = {}
    subresources: list[tuple[str, str, dict[str, Any]]] = []
    for entry in listed.get("resources") or []:
        name = entry.get("name", "")
        if "/" in name:
            parent, _, sub = name.partition("/")
            subresources.append((parent, sub, entry))
            continue
        resource: dict[str, Any] = {
            "resource": name, "responseKind": _kind(entry, group, version),
            "scope": "Namespaced" if entry.get("namespaced") else "Cluster",
            "singularResource": entry.get("singularName") or entry.get("kind", "").lower(),
            "verbs": list(entry.get("verbs") or [])}
        for field in ("shortNames", "categories"):
            if entry.get(field):
                resource[field] = list(entry[field])
        resources[name] = resource
    for parent, sub, entry in subresources:
        owner = resources.get(parent)
        if owner is None:  # a subresource of nothing listed: as the API server, left out
            continue
        owner.setdefault("subresources", []).append(
            {"subresource": sub, "responseKind": _kind(entry, group, version),
             "verbs": list(entry.get("verbs") or [])})
    return list(resources.values())
