"""Lists, gets and watches of any resource: the gateway's hot path.

A plain Starlette endpoint (no FastAPI dependency machinery on the hot path):
parse -> authorize -> cache -> bytes. Errors are checked in the contract's
order: 405 for any verb but GET/HEAD/OPTIONS, 404 unknown resource, 403
denied by policy, 400 bad selector or parameter, 404 unknown object, 503 cache
not yet synced (lists and gets only; streams wait).

A list answer is its envelope plus the cached objects' bytes (``app.kube.envelope``):
no object is decoded or re-encoded, and a large answer is never joined whole. Pages (``limit`` + ``continue``) walk the
keys in order, so every object present for the whole walk is returned exactly
once; like the API server's watch cache, a walk is not a point-in-time snapshot.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
from bisect import bisect_right
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from app.auth.authorization import Access, Grant
from app.http.context import context_of
from app.bridge import run_blocking, run_bulk
from app.cache.resources import ResourceCache
from app.query.engine import KEEP_ANSWERS_BELOW
from app.cache.kept_lists import KeptList
from app.kube.envelope import (LIST_TAIL, KeptBody, ListBody, StoredBody, joined, list_length,
                               list_metadata)
from app.cache.metadata_only import check_read
from app.kube.partial import answer_type, partial, wrong_form
from app.cache.requested_version import check_list_options, fresh_enough
from app.kube.request import (
    Accept,
    Query,
    ResourcePath,
    check_names,
    decode_continue,
    encode_continue,
    negotiate,
    parse_path,
    parse_query,
)
from app.query.selection import Selection
from app.streams.sse import SSEEncoder
from app.cache.answer_age import staleness_headers
from app.kube.status import StatusError, bad_request, forbidden, method_not_allowed, not_found
from app.streams.pipeline import open_stream
from app.kube.table import render_table, table_bytes
from app.streams.watch import WatchEncoder
from informer_core.encoded import EncodedObject
from informer_core.fields import FieldSelector, Term
from informer_core.store import object_key

__all__ = ["check_scope", "resource_endpoint", "select_consistent"]

_READ_METHODS = ("GET", "HEAD")
_GZIP_ABOVE = 128 * 1024
_BULK_ABOVE = 100  # objects cut to their metadata off the event loop from this many
_TAIL = LIST_TAIL


async def resource_endpoint(request: Request) -> Response:
    """Answer one request for a resource collection or object.

    Raises:
        StatusError: every error answer (the application's handler sends it).
    """
    gateway = request.app.state.gateway
    cluster = context_of(request.scope).cluster or gateway.default
    caches = cluster.caches
    method = request.method
    if method == "OPTIONS":
        return Response(status_code=204, headers={"Allow": "GET, HEAD, OPTIONS"})
    if method not in _READ_METHODS:
        raise method_not_allowed(method)
    target = parse_path(request.scope["path"])
    resource = await caches.resolve(target)
    check_scope(target, resource)
    raw_query = request.scope.get("query_string", b"")
    try:
        query, query_error = parse_query(raw_query, gateway.settings.max_query_length), None
    except StatusError as error:  # reported after authorization: 403 comes before 400
        query, query_error = None, error
    accept_header = request.headers.get("accept")
    watching = query.watch if query is not None else b"watch=" in raw_query
    streaming = watching or (target.name is None and accept_header is not None
                             and "text/event-stream" in accept_header)
    # a watch of one object is a watch (the contract authorizes every stream as one), not a get
    verb = "watch" if streaming else ("get" if target.name is not None else "list")
    namespace = target.namespace
    access = Access(verb, resource, namespace, target.name)
    authorization = cluster.authorization
    grant = authorization.granted(request.scope, access) or await authorization.authorize(
        request, access)
    check_names(target)
    if query_error is not None:
        raise query_error
    accept = negotiate(accept_header, allow_sse=target.name is None)
    if accept.kind == "meta":  # the list form for a list, the object form for one or a watch
        wrong = wrong_form(accept.as_kind, target.name is None and not query.watch, resource)
        if wrong is not None:
            raise wrong
    if caches.factory.metadata_only(resource):
        check_read(resource, accept, query)
    scope_ns = gateway.settings.namespace or None
    if scope_ns is not None and namespace not in (None, scope_ns):
        raise forbidden(f"this gateway caches only the namespace {scope_ns!r}",
                        resource=resource.resource, group=resource.group)
    if target.name is None or query.watch:
        check_list_options(query)
    selection = Selection(namespace, query.labels, query.fields, grant.namespaces, query.filters)
    if query.watch:
        if target.name is not None:
            selection = Selection(namespace, query.labels,
                                  _and_name(query, target.name), filters=query.filters)
        return await _watch(request, gateway, cluster, grant, selection, query, accept)
    if accept.kind == "sse":
        return await _sse(request, gateway, cluster, grant, selection, query)
    entry = await caches.load(resource, wait=gateway.settings.sync_timeout)
    await fresh_enough(entry.hub, query, listing=target.name is None)
    if target.name is not None:
        response = _get(request, entry, target, accept, query)
    else:
        response = await _list(request, entry, selection, query, accept)
    since = caches.stale_since(entry)
    if since is not None:  # not following the API server: say how old this may be
        response.raw_headers.extend((k.lower().encode(), v.encode()) for k, v in
                                    staleness_headers(resource.resource, since, cluster=(
                                        cluster.name if gateway.several else "")).items())
    return response


def check_scope(target: ResourcePath, resource: Any) -> None:
    """A path must use a resource the way its scope allows."""
    if target.subresource is not None:
        raise not_found(f"the gateway serves no subresources ({target.resource}/"
                        f"{target.subresource})", resource=resource.resource)
    if target.namespace is not None and not resource.namespaced:
        raise not_found(f"{resource.resource} is not namespaced; use "
                        f"{resource.path}", resource=resource.resource)
    if target.name is not None and resource.namespaced and target.namespace is None:
        raise not_found(f"{resource.resource} is namespaced: get an object by "
                        f"namespaces/{{namespace}}/{resource.resource}/{target.name}",
                        resource=resource.resource)


def _and_name(query: Query, name: str) -> FieldSelector:
    return FieldSelector(query.fields.terms + (Term("metadata.name", name),))


_DIGESTS: dict[tuple, str] = {}  # what an ETag names besides the version, per request shape
_DIGESTS_KEPT = 4096


def _etag(request: Request, entry: ResourceCache, accept: Accept, selection: Selection) -> str:
    scope = request.scope
    shape = (scope["path"], scope.get("query_string", b""), accept.kind, accept.table_version,
             accept.as_kind, selection.partition)
    digest = _DIGESTS.get(shape)
    if digest is None:
        digest = hashlib.blake2b(
            f"{shape[0]}?{shape[1].decode('latin-1')}|{accept.kind}{accept.table_version}"
            f"{accept.as_kind}|{selection.partition}".encode(), digest_size=8).hexdigest()
        if len(_DIGESTS) >= _DIGESTS_KEPT:  # hostile variety must not grow memory
            _DIGESTS.clear()
        _DIGESTS[shape] = digest
    return f'"{entry.hub.id}-{entry.resource_version()}-{digest}"'


async def _finish(request: Request, body: bytes, etag: str | None = None) -> Response:
    headers = {"Cache-Control": "no-cache, private"}
    if etag is not None:
        headers["ETag"] = etag
    if len(body) > _GZIP_ABOVE and _wants_gzip(request):
        body = await run_blocking(gzip.compress, body, 1)
        headers["Content-Encoding"] = "gzip"
        headers["Vary"] = "Accept-Encoding"
    return Response(body, media_type="application/json", headers=headers)


def _wants_gzip(request: Request) -> bool:
    return "gzip" in request.headers.get("accept-encoding", "")


def _get(request: Request, entry: ResourceCache, target: ResourcePath, accept: Accept,
         query: Query) -> Response:
    found = entry.indexer.get_encoded_by_key(object_key(target.namespace, target.name))
    if found is None:
        res = entry.resource
        raise not_found(f'{res.resource}{"." + res.group if res.group else ""} "{target.name}" '
                        f"not found", resource=res.resource, name=target.name or "", group=res.group)
    if accept.kind == "table":
        body = table_bytes([found.to_dict()], entry.printer, table_version=accept.table_version,
                           include=query.include_object,
                           resource_version=found.resource_version)
        return Response(body, media_type="application/json")
    if accept.kind == "meta":
        return Response(partial(found.raw, accept.table_version), media_type="application/json")
    return StoredBody(found.raw)


_CONSISTENT_TRIES = 5


async def select_consistent(entry: ResourceCache, selection: Selection,
                             filtered: bool = True) -> tuple[list, str, bool]:
    """The matching objects, the version they are exactly the server's state at, and
    whether they were read from the indexer (else from the hub's view, behind it).

    Lists are selected from the indexer (its indexes make label queries fast),
    which the informer updates a moment before the hub (on the loop) hears of
    it; stamped with the hub's version, a list taken in that moment could hold
    a change newer than its version, or lack an object deleted after it, and a
    client watching from its version (as informers do) would get that change
    again. So the list carries the version the indexer itself was exactly at
    while it was read (``read_consistently``); a watch from it waits the moment
    the hub needs to get there. In a burst the indexer may be at no version: a
    few tries, then the hub's own view, at the hub's version.
    """
    informer = entry.generic.informer()
    indexer = entry.indexer
    for attempt in range(_CONSISTENT_TRIES):
        objects, version = informer.read_consistently(
            lambda: selection.select(indexer, ordered=True, filtered=filtered))
        if version:
            return objects, version, True
        await asyncio.sleep(0.002 * attempt)
    return (entry.hub.snapshot(selection if filtered else selection.unfiltered()),
            str(entry.hub.rv), False)


async def _list(request: Request, entry: ResourceCache, selection: Selection, query: Query,
                accept: Accept) -> Response:
    etag = _etag(request, entry, accept, selection)
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers={"ETag": etag})
    dashboard = bool(query.view_text)
    partition = selection.partition
    fingerprint = f"{entry.resource.gvr}|{selection.namespace}|{query.label_text}|{query.field_text}"
    if dashboard or partition:  # what else makes the answer: kept results and tokens are its
        fingerprint += f"|{query.view_text}|{partition}"
    answer_key = None
    if dashboard and accept.kind == "json":
        # a dashboard's refresh while nothing changed: the answer it got last time
        version = entry.generic.informer().settled_version()
        answer_key = (fingerprint, query.continue_key, query.limit, _wants_gzip(request))
        kept = entry.queries.answer(answer_key, version) if version else None
        if kept is not None:
            return _kept_answer(kept, etag)
    list_key = tick = None
    if not dashboard and accept.kind in ("json", "meta"):
        # an answer kept while its buckets are unchanged (app.cache.kept_lists)
        list_key = (fingerprint, accept.kind, accept.table_version, accept.as_kind,
                    query.fields_text, query.continue_key, query.limit)
        kept_list = entry.lists.get(list_key)
        if kept_list is not None and (len(kept_list.whole) <= _GZIP_ABOVE
                                      or not _wants_gzip(request)):
            answer = _kept_list(entry, accept, list_key, kept_list, etag)
            if answer is not None:
                return answer
        tick = entry.indexer.thread_safe_store.tick  # before the read: see unchanged_since
    objects, rv, from_store = await select_consistent(entry, selection, filtered=not dashboard)
    if not from_store:
        tick = None  # the hub's view may be behind the store's marks: not kept
    places = None
    if dashboard:
        result = await entry.queries.result(objects, query, fingerprint, rv)
        if result.summary is not None:
            response = await _finish(request, result.summary, etag)
            if answer_key is not None:
                entry.queries.keep_answer(answer_key, rv, response.body, response.headers)
            return response
        objects, places = result.objects, result.places
    start = 0
    if query.continue_key is not None:
        after, place = decode_continue(query.continue_key, fingerprint)
        if places is not None:
            position = query.ordering.check_place(place)
            if position is None:
                raise bad_request("invalid continue token: it holds no place in this "
                                  "sort order; start the list again without 'continue'")
            start = query.ordering.after(places, position)
        else:
            start = bisect_right(objects, after, key=_key)
    token, remaining = "", None
    end = len(objects)
    if query.limit and end - start > query.limit:
        end = start + query.limit
        remaining = len(objects) - end
        last = end - 1
        token = encode_continue(objects[last].key, fingerprint,
                                places[last] if places is not None else None)
    objects = objects[start:end] if start or end < len(objects) else objects
    if accept.kind == "table":
        body = await render_table(len(objects), (o.to_dict() for o in objects), entry.printer,
                                  table_version=accept.table_version,
                                  include=query.include_object, resource_version=rv,
                                  continue_token=token, remaining=remaining)
        return await _finish(request, body, etag)
    head = _list_head(entry, accept, rv, token, remaining)
    if accept.kind == "meta":
        version = accept.table_version
        items = (await run_bulk(lambda: [partial(o.raw, version) for o in objects])
                 if len(objects) >= _BULK_ABOVE else [partial(o.raw, version) for o in objects])
    elif query.fields_paths is not None:
        items = await entry.queries.project(
            entry.queries.projection(query.fields_text, query.fields_paths), objects)
    else:
        items = [o.raw for o in objects]
    length = list_length(head, items, _TAIL)
    compressed = length > _GZIP_ABOVE and _wants_gzip(request)
    if list_key is not None and tick is not None and not compressed:
        # (a compressed answer is never sent from a kept one: an uncompressed ask keeps it)
        store = entry.indexer.thread_safe_store
        index, values = selection.read_from(entry.indexer)
        if entry.lists.worth_keeping(list_key, length, tick,
                                     lambda t: store.unchanged_since(t, index, values)):
            whole = joined(head, items)
            entry.lists.keep(list_key, KeptList(tick, index, values, rv, whole,
                                                (len(head), len(whole) - len(_TAIL)),
                                                token, remaining))
            return KeptBody((whole,), etag)
    headers = {"Cache-Control": "no-cache, private", "ETag": etag}
    if answer_key is not None and length <= KEEP_ANSWERS_BELOW:
        body = head + b",".join(items) + _TAIL
        if compressed:
            response = await _finish(request, body, etag)
        else:
            response = Response(body, media_type="application/json", headers=headers)
        entry.queries.keep_answer(answer_key, rv, response.body, response.headers)
        return response
    if compressed:
        return ListBody(head, items, _TAIL, headers, gzip=True)
    return ListBody(head, items, _TAIL, headers)


def _key(obj: EncodedObject) -> str:
    return obj.key


def _list_head(entry: ResourceCache, accept: Accept, version: str, token: str,
               remaining: int | None) -> bytes:
    """A JSON list's envelope up to its first item."""
    kind, api_version = answer_type(entry.resource, accept, listing=True)
    return (b'{"apiVersion":' + orjson.dumps(api_version) + b',"kind":' + orjson.dumps(kind)
            + b',"metadata":' + orjson.dumps(list_metadata(version, token, remaining))
            + b',"items":[')


def _kept_list(entry: ResourceCache, accept: Accept, key: tuple, kept: KeptList,
               etag: str) -> KeptBody | None:
    """The kept answer at the version the store is exactly at, if nothing it was read from
    was written since (else ``None``: read it again)."""
    store = entry.indexer.thread_safe_store
    unchanged, version = entry.generic.informer().read_consistently(
        lambda: store.unchanged_since(kept.tick, kept.index, kept.values))
    if not unchanged or not version:
        return None
    entry.lists.hits += 1
    head = (_list_head(entry, accept, version, kept.token, kept.remaining)
            if version != kept.version else b"")
    return KeptBody(entry.lists.renewed(key, kept, version, head), etag)


def _kept_answer(kept: tuple[bytes, dict[str, str]], etag: str) -> Response:
    body, headers = kept
    response = Response(body, headers={**headers, "ETag": etag})
    return response


async def _watch(request: Request, gateway: Any, cluster: Any, grant: Grant,
                 selection: Selection, query: Query, accept: Accept) -> Response:
    encoder = WatchEncoder(accept, query, gateway.settings.bookmark_interval)
    return await open_stream(gateway, cluster, request, grant, selection, query, encoder)


async def _sse(request: Request, gateway: Any, cluster: Any, grant: Grant,
               selection: Selection, query: Query) -> Response:
    settings = gateway.settings
    encoder = SSEEncoder(request.headers.get("last-event-id", ""), settings.sse_retry_ms,
                         settings.heartbeat_interval,
                         None if query.fields_paths is None else (query.fields_text, query.fields_paths))
    return await open_stream(gateway, cluster, request, grant, selection, query, encoder)
