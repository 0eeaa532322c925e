"""Resources cached as their metadata alone (``--metadata-only``), and the reads they can answer.

A dashboard that counts and names Pods, or a controller that follows owners and labels (what
client-go's metadata informers are for), never opens an object's ``spec`` or ``status``; yet
a cache of whole Pods keeps them, several KiB each. For the resources named by
``--metadata-only`` the informers ask the API server for ``PartialObjectMetadata``, as
client-go's metadata informer factory does (``informer_core.factory``): nothing but metadata
is sent, parsed or kept.

What such a cache cannot answer it refuses rather than answers wrong. A read that wants the
objects themselves — plain JSON, a ``Table`` (its columns are ``spec`` and ``status``), an SSE
stream, a ``fields=`` projection (its items are whole objects cut down) — is 406 naming the
flag; a read in the metadata forms (``app.kube.partial``) is answered, and so is a
``summary=`` of a list (counts, no objects: a dashboard's header badges). A selection on anything but ``metadata`` (a field selector on ``spec.nodeName``, a
dashboard filter or sort on ``status.phase``) would match against absent fields and answer a
silently wrong list: 400, naming the path and the flag.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from app.kube.request import Accept, Query
from app.kube.status import StatusError, bad_request
from informer_core.discovery import APIResource, names_resource

__all__ = ["check_read", "covering"]

FLAG = "--metadata-only"


def covering(names: Iterable[str]) -> Callable[[APIResource], bool] | None:
    """Whether a resource is one of ``names`` (written as kubectl writes them, any version
    unless one is written); ``None`` when there are none."""
    names = tuple(n for n in names if n.strip())
    if not names:
        return None
    # asked on every read of every resource: each answer kept, by the resource's
    # group, version and name (a handful per cluster, at most discovery's few hundred)
    answers: dict[tuple[str, str, str], bool] = {}

    def covers(resource: APIResource) -> bool:
        key = (resource.group, resource.version, resource.resource)
        found = answers.get(key)
        if found is None:
            found = answers[key] = any(names_resource(name, resource) for name in names)
        return found

    return covers


def _named(resource: APIResource) -> str:
    return f"{resource.resource}.{resource.group}" if resource.group else resource.resource


def _paths(query: Query) -> Iterable[str]:
    for term in query.fields.terms:
        yield term.field
    for rule in query.filters:
        yield rule.path.text
    if query.ordering is not None:
        for path, _ in query.ordering.keys:
            yield path.text
    for path in query.fields_paths or ():
        yield path.text
    for path in query.summary or ():
        yield path.text


def check_read(resource: APIResource, accept: Accept, query: Query) -> None:
    """Refuse what a metadata-only cache of ``resource`` cannot answer (see the module).

    Raises:
        StatusError: 406 for a read of whole objects; 400 for a selection, sort or
            projection on a path outside ``metadata``.
    """
    named = _named(resource)
    counted = accept.kind == "json" and query.summary is not None and not query.watch
    if accept.kind != "meta" and not counted:
        raise StatusError(
            406, f"{named} are cached as metadata only ({FLAG}): ask for "
                 f"application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1 (lists) or "
                 f"as=PartialObjectMetadata (gets and watches), count them with summary=, or "
                 f"read them from the API server",
            "NotAcceptable")
    for path in _paths(query):
        if path != "metadata" and not path.startswith(("metadata.", "metadata[")):
            raise bad_request(f"{path} cannot be selected, sorted or shown: {named} are cached "
                              f"as metadata only ({FLAG})")
