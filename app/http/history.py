"""``/history/`` + a list or object path: the changes the gateway kept, newest first, for people.

``/history/core/v1/namespaces/shop/pods`` (or ``/history/api/v1/...``, ``/history/apis/apps/v1/
...``) answers a ``ChangeList``: each change's ``type``, ``resourceVersion``, the ``time`` the
gateway received it, the ``object`` after it and an RFC 6902 ``patch`` from the object's
previous version (``app.history.patches``). A path naming one object gives that object's
history. ``since`` and ``until`` (RFC 3339) bound the times; ``labelSelector`` and
``fieldSelector`` select by the object after the change or before it (a change that moved an
object out of a selection is part of its history); ``limit`` (at most 1,000, default 100) and
``continue`` page; ``fields=patch`` leaves the objects out.

Reading the past is reading: the access is the ``list`` of the resource (``get`` of the
object) in that namespace, decided as for the present (``app.auth.authorization``: the same
401 and 403), so whoever may not read Pods today reads no Pod's history either. Secrets are
never kept. A gateway without ``--history`` answers 404, saying so.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from datetime import datetime
from typing import Any, NamedTuple
from urllib.parse import parse_qsl

import orjson
from starlette.responses import Response

from app.cache.answer_age import warning_header
from app.history.cluster_history import PLACE
from app.history.recorder import resource_key
from app.http.merged import Reached, reach
from app.http.resources import check_scope
from app.kube.access import Access
from app.kube.context import context_of
from app.kube.request import check_names, parse_path
from app.kube.status import StatusError, bad_request, not_found
from app.query.selection import Selection
from informer_core.fields import parse_field_selector
from informer_core.labels import parse_selector
from informer_core.errors import SelectorError

__all__ = ["PREFIX", "history_answer", "merged_history_answer"]

PREFIX = "/history"
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
_DONE = "done"  # a cluster whose changes a merged walk has all sent


def _time(name: str, text: str) -> float:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise bad_request(f"invalid value {text[:64]!r} for {name}: not an RFC 3339 time "
                          f"(2026-12-05T10:00:00Z)") from None


def _decoded(token: str, fingerprint: str, valid: Any) -> Any:
    """The place a ``continue`` token of this query holds (``valid`` says its shape is right).

    Raises:
        StatusError: 400 for a token this query did not issue (another query's, or forged).
    """
    try:
        doc = orjson.loads(base64.urlsafe_b64decode(token.encode() + b"=" * (-len(token) % 4)))
        place = doc["at"]
        if doc.get("q") != fingerprint or not valid(place):
            raise ValueError
    except (ValueError, KeyError, TypeError, binascii.Error, orjson.JSONDecodeError):
        raise bad_request(f"invalid continue token {token[:64]!r}: not one this history "
                          f"query issued; start again without 'continue'") from None
    return place


def _token(place: Any, fingerprint: str) -> str:
    return base64.urlsafe_b64encode(orjson.dumps({"at": place, "q": fingerprint})).decode()


def _is_place(place: Any) -> bool:
    """``[rv, namespace, name]``: where one cluster's walk stopped."""
    return isinstance(place, list) and len(place) == 3 and type(place[0]) is int \
        and isinstance(place[1], str) and isinstance(place[2], str)


def _are_places(places: Any) -> bool:
    """Each cluster's place in a merged walk: a place, none yet, or done."""
    return isinstance(places, dict) and all(
        isinstance(k, str) and (v is None or v == _DONE or _is_place(v)) for k, v in places.items())


class Options(NamedTuple):
    """A history query's parameters, read and checked."""

    since: float | None
    until: float | None
    limit: int
    labels: Any
    fields: Any
    with_object: bool
    fingerprint: str  # what a continue token of this query must name
    token: str


def _target(scope: dict) -> tuple[str, Any]:
    """The path after ``/history`` and what it names.

    Raises:
        StatusError: 405 for anything but a read; 404 for a path of no resource.
    """
    if scope["method"] not in ("GET", "HEAD"):
        raise StatusError(405, f"the history is read-only: {scope['method']} is not allowed",
                          "MethodNotAllowed")
    path = scope["path"][len(PREFIX):]
    return path, parse_path(path)


async def history_answer(scope: dict, receive: Any) -> Response:
    """Answer ``GET /history/...`` for the request's cluster (see the module docstring).

    Raises:
        StatusError: 404 for a gateway without history or a path of no resource, 403 for
            a caller who may not read the resource there, 400 for a bad query, 503 when the
            store cannot be read.
    """
    context = context_of(scope)
    gateway = context.gateway or scope["app"].state.gateway
    cluster = context.cluster or gateway.default
    path, target = _target(scope)
    resource = await cluster.caches.resolve(target)
    check_scope(target, resource)
    verb = "get" if target.name is not None else "list"
    access = Access(verb, resource, target.namespace, target.name)
    authorization = cluster.authorization
    grant = authorization.granted(scope, access) or await authorization.authorize(scope, access)
    check_names(target)
    history = cluster.history
    if history is None:
        raise not_found("this gateway keeps no history: start it with --history "
                        "(sqlite:///PATH or postgresql://...)", resource="history")
    options = _options(scope, path)
    selection = Selection(target.namespace, options.labels, options.fields, grant.namespaces)
    matches = None if selection.namespace_only else selection.matches
    below = tuple(_decoded(options.token, options.fingerprint, _is_place)) \
        if options.token else None
    key = resource_key(resource.group, resource.version, resource.resource)
    items, next_place = await history.page(key, below, target.namespace, target.name,
                                           options.since, options.until, options.limit, matches,
                                           with_object=options.with_object)
    for item in items:
        del item[PLACE]
    metadata: dict[str, Any] = {}
    if next_place is not None:
        metadata["continue"] = _token(list(next_place), options.fingerprint)
    return _answer(metadata, items, [])


def _answer(metadata: dict[str, Any], items: list[dict[str, Any]],
            warnings: list[str]) -> Response:
    body = orjson.dumps({"kind": "ChangeList", "apiVersion": "kube-cache-gateway.io/v1",
                         "metadata": metadata, "items": items})
    headers = {"Cache-Control": "no-cache, private"}
    if warnings:
        headers["Warning"] = warning_header(sorted(warnings))
    return Response(body, media_type="application/json", headers=headers)


async def merged_history_answer(scope: dict, receive: Any) -> Response:
    """``/clusters/*/history/`` + a collection path: every served cluster's changes of the
    resource, newest first by the time the gateway received them, each with its
    ``cluster``; a cluster the caller may not list it in, or that keeps no history, is left
    out (with a ``Warning`` unless the caller may not read it). The continue token holds
    each cluster's own place.

    Raises:
        StatusError: 400 for a path naming one object (names are per cluster) or a bad
            query, 404 when no cluster serves the resource.
    """
    context = context_of(scope)
    gateway = context.gateway or scope["app"].state.gateway
    path, target = _target(scope)
    if target.name is not None:
        raise bad_request(f"one object's history ({target.name!r}) is not merged: names are "
                          f"per cluster; ask /clusters/NAME/history/...")
    check_names(target)
    options = _options(scope, path, merged=True)
    limit = options.limit
    places = _decoded(options.token, options.fingerprint, _are_places) if options.token else {}
    warnings: list[str] = []
    clusters = [c for name, c in sorted(gateway.clusters.items())
                if places.get(name, "") != _DONE]
    reached = await asyncio.gather(*(reach(scope, gateway, c, target, "list", warnings)
                                     for c in clusters))
    found = [r for r in reached if isinstance(r, Reached)]
    if not found and not any(isinstance(r, StatusError) for r in reached):
        raise not_found(f"no cluster serves the resource of {scope['path']}")

    async def page_of(share: Reached) -> tuple[str, list[dict[str, Any]], Any]:
        cluster, resource = share.cluster, share.entry.resource
        if cluster.history is None:
            warnings.append(f"cluster {cluster.name}: keeps no history")
            return cluster.name, [], None
        selection = Selection(target.namespace, options.labels, options.fields,
                              share.grant.namespaces)
        place = places.get(cluster.name)
        items, after = await cluster.history.page(
            resource_key(resource.group, resource.version, resource.resource),
            tuple(place) if place else None, target.namespace, None, options.since,
            options.until, limit, None if selection.namespace_only else selection.matches,
            options.with_object)
        return cluster.name, items, after

    pages = await asyncio.gather(*(page_of(share) for share in found))
    heads = {name: (items, after) for name, items, after in pages}
    chosen: list[dict[str, Any]] = []
    taken = {name: 0 for name in heads}
    while len(chosen) < limit:
        ready = [(items[taken[name]]["time"], name) for name, (items, _) in heads.items()
                 if taken[name] < len(items)]
        if not ready:
            break
        _, name = max(ready)  # the newest of the clusters' next changes
        item = heads[name][0][taken[name]]
        taken[name] += 1
        item["cluster"] = name
        chosen.append(item)
    following: dict[str, Any] = dict(places)
    more = False
    for name, (items, after) in heads.items():
        if taken[name] < len(items):  # from its first change not sent
            following[name] = list(items[taken[name] - 1][PLACE]) if taken[name] else places.get(name)
            more = True
        elif after is not None:
            following[name] = list(after)
            more = True
        else:
            following[name] = _DONE
    for item in chosen:
        del item[PLACE]
    metadata: dict[str, Any] = {}
    if more:
        metadata["continue"] = _token(following, options.fingerprint)
    return _answer(metadata, chosen, warnings)


def _options(scope: dict, path: str, merged: bool = False) -> Options:
    """The query's ``since``, ``until``, ``limit``, selectors, ``fields`` and ``continue``.

    Raises:
        StatusError: 400 for any of them malformed.
    """
    query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"),
                           keep_blank_values=True))
    since = _time("since", query["since"]) if query.get("since") else None
    until = _time("until", query["until"]) if query.get("until") else None
    try:
        limit = int(query.get("limit") or DEFAULT_LIMIT)
    except ValueError:
        raise bad_request(f"invalid value {query['limit'][:32]!r} for limit: not an integer") \
            from None
    if not 0 < limit <= MAX_LIMIT:
        raise bad_request(f"limit must be 1-{MAX_LIMIT}, not {limit}")
    try:
        labels = parse_selector(query.get("labelSelector", ""))
        fields = parse_field_selector(query.get("fieldSelector", ""))
    except SelectorError as exc:
        raise bad_request(f"invalid selector: {exc}") from None
    fingerprint = "|".join((("merged",) if merged else ()) + (
        path, query.get("labelSelector", ""), query.get("fieldSelector", ""),
        query.get("since", ""), query.get("until", "")))
    return Options(since, until, limit, labels, fields, query.get("fields") != "patch",
                   fingerprint, query.get("continue", ""))
