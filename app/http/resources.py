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
from bisect import bisect_right
from collections.abc import Hashable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from app.auth.authorization import Grant
from app.bridge import run_blocking, run_bulk
from app.cache.kept_lists import KeptList, Mark
from app.cache.resources import ResourceCache
from app.kube.access import Access, narrowed_to
from app.kube.context import context_of
from app.kube.shapes import Reading, Shape, request_headers
from app.kube.envelope import (GZIP_ABOVE, LIST_TAIL, KeptBody, ListBody, joined,
                               list_head, list_length)
from app.cache.metadata_only import check_read
from app.cache.requested_version import check_list_options, fresh_enough
from app.history.recorder import resource_key
from app.kube.partial import partial, wrong_form
from app.kube.request import (
    Accept,
    Query,
    ResourcePath,
    check_names,
    continued_at,
    decode_continue,
    encode_continue,
    negotiate,
    parse_path,
    parse_query,
)
from app.cache.answer_age import staleness_headers
from app.kube.status import StatusError, bad_request, forbidden, method_not_allowed, not_found
from app.kube.table import render_table, table_bytes
from app.query.selection import Selection
from app.query.summary import SUMMARY_TAIL, summary_head
from app.streams.pipeline import open_stream
from app.streams.sse import SSEEncoder
from app.streams.watch import WatchEncoder
from informer_core.encoded import by_key
from informer_core.fields import FieldSelector, Term

__all__ = ["check_scope", "past_objects", "resource_answer", "resource_endpoint",
           "select_consistent"]

_READ_METHODS = ("GET", "HEAD")
_BULK_ABOVE = 100  # objects cut to their metadata off the event loop from this many
_TAIL = LIST_TAIL


async def resource_endpoint(request: Request) -> Response:
    """``resource_answer`` as a Starlette endpoint (the application's route for any path
    no other route takes)."""
    return await resource_answer(request.scope, request.receive)


async def resource_answer(scope: dict, receive: Any) -> Response:
    """Answer one request for a resource collection or object.

    A request of a shape checked before (``app.kube.shapes``) is authorized and read
    straight away; any other is checked (``_checked``) first. Only those make a Starlette
    ``Request``: on the cheapest answer (one object by name) making it was a measurable
    part of the whole.

    Raises:
        StatusError: every error answer (the application's handler sends it).
    """
    context = context_of(scope)
    gateway = context.gateway or scope["app"].state.gateway
    cluster = context.cluster or gateway.default
    method = scope["method"]
    if method == "OPTIONS":
        return Response(status_code=204, headers={"Allow": "GET, HEAD, OPTIONS"})
    if method not in _READ_METHODS:
        raise method_not_allowed(method)
    accept_header, if_none_match, gzip_ok = request_headers(scope["headers"])
    key = (scope["path"], scope.get("query_string", b""), accept_header)
    caches = cluster.caches
    shape = cluster.shapes.get(key, caches.factory.discovery.view)
    if shape is not None:
        authorization = cluster.authorization
        access = shape.access
        grant = authorization.granted(scope, access) or await authorization.authorize(
            scope, access)
    else:
        request = Request(scope, receive)
        shape, grant = await _checked(request, gateway, cluster, key)
        if shape.access.verb != "watch":
            cluster.shapes.keep(key, shape)  # (streams are long: their checks are not kept)
        elif shape.query.watch or shape.accept.kind == "sse":
            return await _stream(request, gateway, cluster, shape, grant)
    query, resource = shape.query, shape.resource
    entry = caches.ready_entry(shape.gvr) or await caches.load(
        resource, wait=gateway.settings.sync_timeout)
    listing = shape.target.name is None
    history = cluster.history if listing else None
    past = continued_at(query.continue_key) if history is not None and query.continue_key else None
    if not isinstance(past, int):
        past = None  # (a merged list's token: refused by decode_continue, as any other's)
    if query.resource_version and await fresh_enough(entry.hub, query, listing=listing,
                                                     history=history is not None):
        past = int(query.resource_version)
    if past is not None:
        response = await _past_list(history, entry, shape, shape.reading(grant.namespaces),
                                    past, gzip_ok)
    elif not listing:
        response = _get(entry, shape)
    else:
        response = await _list(entry, shape, shape.reading(grant.namespaces), if_none_match,
                               gzip_ok)
    since = caches.stale_since(entry)
    if since is not None:  # not following the API server: say how old this may be
        response.raw_headers.extend((k.lower().encode(), v.encode()) for k, v in
                                    staleness_headers(resource.resource, since, cluster=(
                                        cluster.name if gateway.several else "")).items())
    return response


async def _checked(request: Request, gateway: Any, cluster: Any,
                   key: tuple[str, bytes, str | None]) -> tuple[Shape, Grant]:
    """Check a request of a shape not seen before, in the contract's order (404 unknown
    resource, 403 denied, 400 bad names, query or form), authorizing it on the way.

    Raises:
        StatusError: the first check that fails.
    """
    path, raw_query, accept_header = key
    caches = cluster.caches
    target = parse_path(path)
    resource = await caches.resolve(target)
    check_scope(target, resource)
    discovery = caches.factory.discovery
    view = discovery.view  # the view the resource is of, or one it never matches again
    if discovery.lookup(resource.gvr) is not resource:
        view = None
    try:
        query, query_error = parse_query(raw_query, gateway.settings.max_query_length), None
    except StatusError as error:  # reported after authorization: 403 comes before 400
        query, query_error = None, error
    watching = query.watch if query is not None else b"watch=" in raw_query
    streaming = watching or (target.name is None and accept_header is not None
                             and "text/event-stream" in accept_header)
    # a watch of one object is a watch (the contract authorizes every stream as one), not a get
    verb = "watch" if streaming else ("get" if target.name is not None else "list")
    namespace = target.namespace
    name = target.name
    if name is None and query is not None:
        name = narrowed_to(query.fields)  # a list or watch of one object asks for that name
    access = Access(verb, resource, namespace, name)
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
    return Shape(path, raw_query, target, resource, query, accept, access, view), grant


async def _stream(request: Request, gateway: Any, cluster: Any, shape: Shape,
                  grant: Grant) -> Response:
    """A watch (of a collection, or of one object by name) or an event stream."""
    query, target = shape.query, shape.target
    if query.watch:
        if target.name is not None:
            selection = Selection(target.namespace, query.labels,
                                  _and_name(query, target.name), filters=query.filters)
        else:
            selection = shape.reading(grant.namespaces).selection
        return await _watch(request, gateway, cluster, grant, selection, query, shape.accept)
    selection = shape.reading(grant.namespaces).selection
    return await _sse(request, gateway, cluster, grant, selection, query)


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


def _etag(entry: ResourceCache, reading: Reading) -> str:
    return f'"{entry.hub.id}-{entry.resource_version()}-{reading.digest}"'


async def _finish(body: bytes, etag: str | None, gzip_ok: bool) -> Response:
    headers = {"Cache-Control": "no-cache, private"}
    if etag is not None:
        headers["ETag"] = etag
    if len(body) > GZIP_ABOVE and gzip_ok:
        body = await run_blocking(gzip.compress, body, 1)
        headers["Content-Encoding"] = "gzip"
        headers["Vary"] = "Accept-Encoding"
    return Response(body, media_type="application/json", headers=headers)


def _get(entry: ResourceCache, shape: Shape) -> Response:
    found = entry.indexer.get_encoded_by_key(shape.key)
    if found is None:
        target = shape.target
        res = entry.resource
        raise not_found(f'{res.resource}{"." + res.group if res.group else ""} "{target.name}" '
                        f"not found", resource=res.resource, name=target.name or "", group=res.group)
    accept = shape.accept
    if accept.kind == "table":
        body = table_bytes([found.to_dict()], entry.printer, table_version=accept.table_version,
                           include=shape.query.include_object,
                           resource_version=found.resource_version)
        return Response(body, media_type="application/json")
    if accept.kind == "meta":
        return Response(partial(found.raw, accept.table_version), media_type="application/json")
    return KeptBody((found.raw,), None)


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
    informer = entry.informer
    indexer = entry.indexer
    for attempt in range(_CONSISTENT_TRIES):
        objects, version = informer.read_consistently(
            lambda: selection.select(indexer, ordered=True, filtered=filtered))
        if version:
            return objects, version, True
        await asyncio.sleep(0.002 * attempt)
    return (entry.hub.snapshot(selection if filtered else selection.unfiltered()),
            str(entry.hub.rv), False)


async def _list(entry: ResourceCache, shape: Shape, reading: Reading,
                if_none_match: str | None, gzip_ok: bool) -> Response:
    query, accept, selection = shape.query, shape.accept, reading.selection
    etag = _etag(entry, reading)
    if if_none_match == etag:
        return Response(status_code=304, headers={"ETag": etag})
    dashboard = bool(query.view_text)
    list_key = tick = None
    if accept.kind in ("json", "meta"):
        # an answer kept while its buckets are unchanged (app.cache.kept_lists): a plain
        # list's or a dashboard's, whose filters, order and counts are the same while the
        # objects under its buckets are
        list_key = reading.list_key
        kept_list = entry.lists.get(list_key)
        if kept_list is not None:
            versions = entry.lists.current(kept_list, (entry,))
            if versions is not None:
                version = versions[0]
                head = b""
                if version != kept_list.version:
                    head = (summary_head(version) if query.summary is not None else
                            list_head(entry.resource, accept, version, kept_list.token,
                                      kept_list.remaining))
                size = len(kept_list.whole)
                if not gzip_ok or size <= GZIP_ABOVE:
                    return KeptBody(entry.lists.renewed(list_key, kept_list, version, head),
                                    etag)
                if entry.lists.compresses(size):
                    pieces = entry.lists.renewed(list_key, kept_list, version, head)
                    body = await entry.lists.compressed(list_key, kept_list, version, pieces)
                    return KeptBody((body,), etag, gzipped=True)
                # (larger, to a caller that accepts gzip: compressed as it is sent, below)
        tick = entry.indexer.thread_safe_store.tick  # before the read: see unchanged_since
    objects, rv, from_store = await select_consistent(entry, selection, filtered=not dashboard)
    if not from_store:
        tick = None  # the hub's view may be behind the store's marks: not kept
    return await _answer(entry, shape, reading, objects, rv, etag, gzip_ok, list_key, tick)


async def _past_list(history: Any, entry: ResourceCache, shape: Shape, reading: Reading,
                     version: int, gzip_ok: bool) -> Response:
    """An ``Exact`` list at a version the cache has moved past, from the history store
    (``app.history``), answered in every form a list of the present is; its pages are read
    at the same version (their continue tokens carry it)."""
    selection = reading.selection
    if shape.query.view_text:
        selection = selection.unfiltered()  # a dashboard's filters are its query's (``_answer``)
    objects = await past_objects(history, entry, version, selection)
    etag = f'"past-{version}-{reading.digest}"'  # a past state never changes
    return await _answer(entry, shape, reading, objects, str(version), etag, gzip_ok, None,
                         None, past=version)


async def past_objects(history: Any, entry: ResourceCache, version: int,
                       selection: Selection) -> list:
    """The objects ``selection`` chooses of the state at ``version``, from the history store,
    in key order.

    Raises:
        StatusError: 410 for a version the history does not hold, 503 when it cannot be read.
    """
    resource = entry.resource
    key = resource_key(resource.group, resource.version, resource.resource)
    await history.span_of(key, version, entry.hub.rv)
    objects = await history.state_at(key, version, selection.namespace)
    if selection.namespace_only:
        return objects
    matches = selection.matches
    return (await run_bulk(lambda: [o for o in objects if matches(o)])
            if len(objects) >= _BULK_ABOVE else [o for o in objects if matches(o)])


async def _answer(entry: ResourceCache, shape: Shape, reading: Reading, objects: list,
                  rv: str, etag: str, gzip_ok: bool, list_key: Hashable | None,
                  tick: int | None, past: int | None = None) -> Response:
    """A list's answer from ``objects`` (selected, in key order) at version ``rv``: a
    dashboard's query, the page ``continue`` and ``limit`` ask for, in the accepted form;
    kept (``_keep``) when ``list_key`` and ``tick`` allow."""
    query, accept, selection = shape.query, shape.accept, reading.selection
    fingerprint = reading.fingerprint
    dashboard = bool(query.view_text)
    places = None
    if dashboard:
        result = await entry.queries.result(objects, query, fingerprint, rv)
        if result.summary is not None:
            if list_key is not None and tick is not None:
                head = summary_head(rv)  # the summary is it, its counts, its tail
                counts = result.summary[len(head):-len(SUMMARY_TAIL)]
                kept = await _keep(entry, list_key, tick, selection, rv, head, [counts],
                                   SUMMARY_TAIL, "", None, etag, gzip_ok)
                if kept is not None:
                    return kept
            return await _finish(result.summary, etag, gzip_ok)
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
            start = bisect_right(objects, after, key=by_key)
    token, remaining = "", None
    end = len(objects)
    if query.limit and end - start > query.limit:
        end = start + query.limit
        remaining = len(objects) - end
        last = end - 1
        token = encode_continue(objects[last].key, fingerprint,
                                places[last] if places is not None else None, past)
    objects = objects[start:end] if start or end < len(objects) else objects
    if accept.kind == "table":
        body = await render_table(len(objects), (o.to_dict() for o in objects), entry.printer,
                                  table_version=accept.table_version,
                                  include=query.include_object, resource_version=rv,
                                  continue_token=token, remaining=remaining)
        return await _finish(body, etag, gzip_ok)
    head = list_head(entry.resource, accept, rv, token, remaining)
    if accept.kind == "meta":
        version = accept.table_version
        items = (await run_bulk(lambda: [partial(o.raw, version) for o in objects])
                 if len(objects) >= _BULK_ABOVE else [partial(o.raw, version) for o in objects])
    elif query.fields_paths is not None:
        items = await entry.queries.project(
            entry.queries.projection(query.fields_text, query.fields_paths), objects)
    else:
        items = [o.raw for o in objects]
    if list_key is not None and tick is not None:
        kept = await _keep(entry, list_key, tick, selection, rv, head, items, _TAIL, token,
                           remaining, etag, gzip_ok)
        if kept is not None:
            return kept
    headers = {"Cache-Control": "no-cache, private", "ETag": etag}
    if list_length(head, items, _TAIL) > GZIP_ABOVE and gzip_ok:
        return ListBody(head, items, _TAIL, headers, gzip=True)
    return ListBody(head, items, _TAIL, headers)


async def _keep(entry: ResourceCache, list_key: Hashable, tick: int, selection: Selection,
                rv: str, head: bytes, items: list[bytes], tail: bytes, token: str,
                remaining: int | None, etag: str, gzip_ok: bool) -> KeptBody | None:
    """Keep the answer ``head``, ``items``, ``tail`` read at ``tick`` (``app.cache.kept_lists``)
    and send it from what is kept, compressed if it is large and the caller accepts gzip;
    ``None`` when it is not worth keeping (made and sent as it goes)."""
    length = list_length(head, items, tail)
    compressed = length > GZIP_ABOVE and gzip_ok
    if compressed and not entry.lists.compresses(length):
        return None  # compressed slice by slice as it is sent; an uncompressed ask keeps it
    marks = (Mark.of(entry, tick, selection),)
    if not entry.lists.worth_keeping(list_key, length, marks):
        return None
    whole = joined(head, items, tail)
    kept = KeptList.of(marks, rv, head, whole, token, remaining, tail)
    entry.lists.keep(list_key, kept)
    if compressed:
        return KeptBody((await entry.lists.compressed(list_key, kept, rv, (whole,)),), etag,
                        gzipped=True)
    return KeptBody((whole,), etag)




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
