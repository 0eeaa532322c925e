"""Merged reads: ``/clusters/*/`` + a collection path, every cluster's objects in one list.

``?clusters=a,b`` narrows ``*`` to those clusters. Each cluster is asked as it would be on
its own path — its resource, its caller's rights (``SubjectAccessReview`` in that cluster),
its cache — and what cannot be had from one cluster leaves that cluster out without
failing the others:

- a cluster whose caller may not read the resource: left out, silently (as a namespace
  a caller may not read is left out of a partitioned list);
- a cluster that does not serve the resource, whose review failed, or whose cache never
  synced, and (under ``*``) one configured but not connected: left out with a ``Warning``
  naming it;
- none at all: ``404`` if no cluster serves the resource, else ``403`` (``503`` when some
  were left out only because they could not be asked, or when no connected cluster serves
  the resource and some are not connected: those may).

Every item carries the annotation ``kube-cache-gateway.io/cluster: NAME``, set on a copy
(never on what is cached) and kept under ``fields=``. Items are ordered by cluster name,
then as each cluster orders them (namespace, then name); with ``sortBy``, by its keys,
then cluster, namespace and name. ``summary`` adds each cluster's counts, and counts by
the cluster annotation when asked.

The list's ``metadata.resourceVersion`` is an opaque token naming each cluster's version
(``kcg1.`` + base64url JSON): never an integer, so no client can mistake it for one cluster's.
``continue`` holds the clusters' versions and the last item's place (cluster and key, or
its sort place), never an offset: the next page starts after that place in the clusters'
order as it is then, so an object that lasts the whole walk is returned exactly once,
however the clusters churn.

A plain list (JSON, no dashboard query) is kept whole while no cluster read wrote under
its buckets (``app.cache.kept_lists``), keyed by the clusters that authorized the caller
and the caller's namespaces in each: asked again, the kept bytes with the token renewed.
Each cluster still reviews the caller first, as for every merged read.
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import heapq
import itertools
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from app.auth.reviews import ReviewError
from app.cache.answer_age import staleness, warning_header
from app.cache.requested_version import check_list_options, fresh_enough
from app.kube.access import Access, narrowed_to
from app.clusters.merging import (CLUSTER_ANNOTATION, decode_versions, encode_versions, tagged,
                                  tagged_dict)
from app.cache.kept_lists import KeptList, Mark
from app.http.resources import check_scope, past_objects, select_consistent
from app.kube.envelope import (GZIP_ABOVE, LIST_TAIL, KeptBody, ListBody, MadeListBody, joined,
                               list_head)
from app.cache.metadata_only import check_read
from app.kube.partial import partial, wrong_form
from app.kube.request import (Query, continued_at, decode_continue, encode_continue, negotiate,
                              parse_path, parse_query)
from app.kube.status import StatusError, bad_request, method_not_allowed, not_found
from app.kube.table import render_table
from app.query.selection import Selection
from app.streams.merged import MergedSSE, MergedWatch, open_merged_stream
from informer_core.encoded import EncodedObject

__all__ = ["Reached", "merged_endpoint", "reach"]

_ANNOTATION_PATH = f"metadata.annotations[{CLUSTER_ANNOTATION}]"
_RAW = operator.attrgetter("raw")
_TAIL = LIST_TAIL


@dataclasses.dataclass(frozen=True, slots=True)
class Reached:
    """What a cluster gives a merged read: the resource's ready cache there, and the
    caller's grant to read it there."""

    cluster: Any
    entry: Any
    grant: Any


async def reach(scope: dict, gateway: Any, cluster: Any, target: Any, verb: str,
                warnings: list[str], wait: bool = True,
                check: Callable[[Any, Any], None] | None = None,
                name: str | None = None) -> Reached | StatusError | None:
    """One cluster's share of a merged read (of ``target``, by ``verb``), or why it has none.

    ``None``: the cluster does not serve the resource (a ``Warning`` said so). A
    ``StatusError``: it cannot be read now — 403 when the caller may not (said to no one),
    else with a ``Warning`` (its review failed, its API server does not answer and its cache
    holds nothing, or the cache has not synced). ``wait``: whether a cache still loading is
    waited for (``--sync-timeout``); a cluster whose API server does not answer never is.
    ``check(cluster, resource)`` raises what the read cannot be, the same in every cluster
    (``app.cache.metadata_only``). ``name``: the one object the read is narrowed to
    (``app.kube.access.narrowed_to``), authorized for that name.

    Raises:
        StatusError: what no cluster could answer differently (a malformed request).
    """
    caches = cluster.caches
    away = caches.api_server_away()
    if away and not cluster.discovery.loaded():
        warnings.append(f"cluster {cluster.name}: left out: its API server does not answer")
        return StatusError(503, "unreachable", "ServiceUnavailable")
    try:
        resource = await caches.resolve(target)
        check_scope(target, resource)
    except StatusError as error:
        warnings.append(f"cluster {cluster.name}: left out: {error.message}")
        return None if error.code in (404, 405) else error
    try:
        grant = await cluster.authorization.authorize(
            scope, Access(verb, resource, target.namespace, name))
    except ReviewError as error:
        warnings.append(f"cluster {cluster.name}: left out: {error.message}")
        return error
    except StatusError as error:
        if error.code == 403:
            return error  # left out without a word: the caller may not read it there
        raise
    if check is not None:  # after authorization, as on a cluster's own path: 403 comes first
        check(cluster, resource)
    ready = caches.ready_entry(resource.gvr)
    try:
        entry = ready or await caches.load(resource, wait=gateway.settings.sync_timeout
                                           if wait and not away else 0.0)
    except StatusError as error:
        warnings.append(f"cluster {cluster.name}: left out: {error.message}")
        return error
    return Reached(cluster, entry, grant)


class _Part:
    """One cluster's share of a merged list."""

    __slots__ = ("cluster", "entry", "objects", "places", "version", "summary", "from_store")

    def __init__(self, cluster: Any, entry: Any, objects: list[EncodedObject],
                 places: Sequence[tuple] | None, version: str, summary: bytes | None,
                 from_store: bool) -> None:
        self.cluster, self.entry, self.objects = cluster, entry, objects
        self.places, self.version, self.summary = places, version, summary
        self.from_store = from_store  # read from the indexer at its version (not the hub's)


def _read_check(accept: Any, query: Query) -> Callable[[Any, Any], None]:
    """The refusals of a read of a resource some cluster caches as metadata only."""
    def check(cluster: Any, resource: Any) -> None:
        if cluster.caches.factory.metadata_only(resource):
            check_read(resource, accept, query)
    return check


async def merged_endpoint(request: Request) -> Response:
    """Answer a collection path under ``/clusters/*/`` (see the module).

    Raises:
        StatusError: every error answer.
    """
    gateway = request.app.state.gateway
    if request.method == "OPTIONS":
        return Response(status_code=204, headers={"Allow": "GET, HEAD, OPTIONS"})
    if request.method not in ("GET", "HEAD"):
        raise method_not_allowed(request.method)
    target = parse_path(request.scope["path"])
    if target.name is not None:
        raise bad_request(f"a get by name ({target.name!r}) is not served under /clusters/*/: "
                          f"names are per cluster; ask /clusters/NAME/...")
    raw = request.scope.get("query_string", b"")
    query, names, asked_version = _query(raw, gateway)
    exact = query.resource_version_match == "Exact" and asked_version is not None
    if query.continue_key and asked_version is None:
        # the pages of an Exact list at past versions are read at them (the token says)
        continued = continued_at(query.continue_key)
        if isinstance(continued, str):
            asked_version = decode_versions(continued, clusters=_nameable(gateway))
            exact = True
    accept = negotiate(request.headers.get("accept"), allow_sse=True)
    if accept.kind == "meta":  # the list form for a list, the object form for a watch
        wrong = wrong_form(accept.as_kind, not query.watch)
        if wrong is not None:
            raise wrong
    warnings = _absent(gateway, names)
    if query.watch:
        check_list_options(query)  # the watch-list form alone (the version is the token)
    if query.watch or accept.kind == "sse":
        return await _stream(request, gateway, target, query, accept, names, asked_version,
                             warnings)
    clusters = _chosen(gateway, names)
    ages: list[int] = []  # of the answers of clusters whose caches are not following
    gzip = "gzip" in request.headers.get("accept-encoding", "")

    async def share_of(cluster: Any) -> _Share | None | StatusError:
        reached = await reach(request.scope, gateway, cluster, target, "list", warnings,
                              check=_read_check(accept, query), name=narrowed_to(query.fields))
        if not isinstance(reached, Reached):
            return reached
        since = cluster.caches.stale_since(reached.entry)
        if since is not None:  # named, as on the cluster's own path (``staleness_headers``)
            age, text = staleness(reached.entry.resource.resource, since, cluster=cluster.name)
            warnings.append(text)
            ages.append(age)
        return _Share(reached, Selection(target.namespace, query.labels, query.fields,
                                         reached.grant.namespaces, query.filters))

    async def part_of(share: _Share) -> _Part:
        cluster, entry, selection = share.reached.cluster, share.reached.entry, share.selection
        dashboard = bool(query.view_text)
        past = False
        if asked_version is not None and cluster.name in asked_version:
            # not older than the token's version of this cluster (waited for, as on its
            # path); an Exact one the cache has passed is its history's (``app.history``)
            past = await fresh_enough(entry.hub, dataclasses.replace(
                query, resource_version=asked_version[cluster.name],
                resource_version_match="Exact" if exact else query.resource_version_match),
                listing=True, history=cluster.history is not None)
        if past:
            version = asked_version[cluster.name]
            objects = await past_objects(cluster.history, entry, int(version),
                                         selection.unfiltered() if dashboard else selection)
            from_store = False
        else:
            objects, version, from_store = await select_consistent(entry, selection,
                                                                   filtered=not dashboard)
        places, summary = None, None
        if dashboard:
            fingerprint = (f"merged|{entry.resource.gvr}|{selection.namespace}|{query.label_text}|"
                           f"{query.field_text}|{query.view_text}|{selection.partition}")
            result = await entry.queries.result(objects, query, fingerprint, version)
            objects, places, summary = result.objects, result.places, result.summary
        return _Part(cluster, entry, objects, places, version, summary, from_store)

    found = await asyncio.gather(*(share_of(c) for c in clusters))
    shares = [f for f in found if isinstance(f, _Share)]
    if not shares:
        refusals = [f for f in found if isinstance(f, StatusError)]
        absent = names is None and gateway.absent()
        if not refusals and not absent:
            raise not_found(f"no cluster serves the resource of {request.scope['path']}: "
                            f"{'; '.join(warnings)}")
        if not refusals or any(r.code != 403 for r in refusals):  # none: absent ones may
            raise StatusError(503, "no cluster could be read: " + "; ".join(warnings),
                              "ServiceUnavailable", headers={"Retry-After": "1"})
        raise refusals[0]
    kept_key = ticks = None
    if (accept.kind == "json" and not query.view_text and query.summary is None
            and query.fields_paths is None and asked_version is None and not warnings):
        # the whole answer kept while no cluster's buckets changed (app.cache.kept_lists);
        # only now, each cluster having authorized the caller for its share
        kept_key = (request.scope["path"], query.label_text, query.field_text,
                    query.continue_key, query.limit,
                    tuple((s.reached.cluster.name, s.selection.partition) for s in shares))
        kept_lists = gateway.merged_lists
        kept = kept_lists.get(kept_key)
        if kept is not None and (len(kept.whole) <= GZIP_ABOVE or not gzip):
            entries = [s.reached.entry for s in shares]
            now = kept_lists.current(kept, entries)
            if now is not None:  # every cluster read the same cache, none written under it
                rv = encode_versions({s.reached.cluster.name: version
                                      for s, version in zip(shares, now)})
                head = (list_head(entries[0].resource, accept, rv, kept.token, kept.remaining)
                        if rv != kept.version else b"")
                return KeptBody(kept_lists.renewed(kept_key, kept, rv, head), None)
        ticks = tuple(s.reached.entry.indexer.thread_safe_store.tick for s in shares)
    parts = await asyncio.gather(*(part_of(s) for s in shares))
    versions = {p.cluster.name: p.version for p in parts}
    headers = {"Cache-Control": "no-cache, private"}
    if warnings:
        headers["Warning"] = warning_header(sorted(warnings))
    if ages:
        headers["Age"] = str(max(ages))  # the oldest part's: the answer is no younger
    if query.summary is not None:
        return Response(_summary(parts, query, versions), media_type="application/json",
                        headers=headers)
    ordered = _ordered(parts, query)
    fingerprint = f"{target.group}/{target.resource}|{target.namespace}|{query.label_text}|" \
                  f"{query.field_text}|{query.view_text}|{','.join(sorted(versions))}"
    start = 0
    if query.continue_key is not None:
        start = _after(ordered, _place_of(query.continue_key, fingerprint), query)
    end, token, remaining = len(ordered), "", None
    if query.limit and end - start > query.limit:
        end = start + query.limit
        remaining = len(ordered) - end
        place, _, last = ordered[end - 1]
        token = encode_continue(last.key, fingerprint, list(place),
                                encode_versions(versions) if exact else None)
    page = ordered[start:end]
    rv = encode_versions(versions)
    first = parts[0].entry
    if accept.kind == "table":
        rows = (tagged_dict(obj.raw, cluster) for _, cluster, obj in page)
        body = await render_table(len(page), rows, first.printer,
                                  table_version=accept.table_version,
                                  include=query.include_object, resource_version=rv,
                                  continue_token=token, remaining=remaining)
        return Response(body, media_type="application/json", headers=headers)
    head = list_head(first.resource, accept, rv, token, remaining)
    if accept.kind == "meta":  # each item's metadata, tagged, as the client takes them
        version = accept.table_version
        return MadeListBody(head, page, lambda items: [partial(tagged(obj.raw, cluster), version)
                                                       for _, cluster, obj in items],
                            _TAIL, headers, gzip=gzip)
    if query.fields_paths is not None:
        projected = []
        by_part = {p.cluster.name: p for p in parts}
        for _, cluster, obj in page:
            queries = by_part[cluster].entry.queries
            (item,) = await queries.project(
                queries.projection(query.fields_text, query.fields_paths), [obj])
            projected.append(tagged(item, cluster))
        return ListBody(head, projected, _TAIL, headers)
    # tagged as the client takes them, one slice at a time; each copy kept while its object
    # is unchanged (app.cache.tagged_copies)
    copies = {p.cluster.name: p.entry.tagged for p in parts}

    def tagged_slice(items: Sequence[tuple[tuple, str, EncodedObject]]) -> list[bytes]:
        made: list[bytes] = []
        for cluster, run in itertools.groupby(items, key=_cluster_of):
            made += copies[cluster].of((obj for _, _, obj in run), cluster, tagged)
        return made

    if (kept_key is not None and ticks is not None and all(p.from_store for p in parts)
            and not (gzip and len(page) > MadeListBody.PER_SLICE)):
        # (a large compressed answer is never sent from a kept one: made as it goes, below)
        length = _tagged_length(head, page, versions)
        if gzip and length > GZIP_ABOVE:  # never sent from a kept answer: not kept for it
            return ListBody(head, tagged_slice(page), _TAIL, headers, gzip=True)
        marks = tuple(Mark.of(p.entry, tick, s.selection)
                      for p, s, tick in zip(parts, shares, ticks))
        kept_lists = gateway.merged_lists
        if kept_lists.worth_keeping(kept_key, length, marks):  # else made as it goes, below
            whole = joined(head, tagged_slice(page))
            kept_lists.keep(kept_key, KeptList.of(marks, rv, head, whole, token, remaining))
            return KeptBody((whole,), None)
    return MadeListBody(head, page, tagged_slice, _TAIL, headers, gzip=gzip)


class _Share:
    """One cluster's part of a merged read before it is read: where, and what it selects."""

    __slots__ = ("reached", "selection")

    def __init__(self, reached: Reached, selection: Selection) -> None:
        self.reached, self.selection = reached, selection


def _cluster_of(item: tuple[tuple, str, EncodedObject]) -> str:
    return item[1]


# what tagging adds to an item at most: ``"annotations":{"<annotation>":"<cluster>"},``
_TAG_BYTES = len(CLUSTER_ANNOTATION) + 24


def _tagged_length(head: bytes, page: Sequence[tuple[tuple, str, EncodedObject]],
                   clusters: dict[str, str]) -> int:
    """About the bytes of ``page`` tagged and enveloped (at most a few bytes per item more),
    known before any item is: whether the answer is kept, and so made whole, or made a
    slice at a time is decided first (tagging a 3 x 10,000 Pods answer whole to learn its
    length allocated 60 MiB for an answer then not kept)."""
    per_item = _TAG_BYTES + max(map(len, clusters), default=0) + 1
    if isinstance(page, _InClusterOrder):
        raw = page.raw_length()
    else:
        raw = sum(len(obj.raw) for _, _, obj in page)
    return len(head) + raw + per_item * len(page) + len(_TAIL)


async def _stream(request: Request, gateway: Any, target: Any, query: Query, accept: Any,
                  names: list[str] | None, asked: dict[str, str] | None,
                  warnings: list[str]) -> Response:
    """A merged watch or event stream (``app.streams.merged``): each cluster reached as a
    list reaches it, for ``watch``."""
    settings = gateway.settings

    async def attach(cluster: Any, wait: bool) -> Any:
        # the start's reasons go into its Warning; a later try's, nowhere (no header is left)
        return await reach(request.scope, gateway, cluster, target, "watch",
                           warnings if wait else [], wait, _read_check(accept, query),
                           narrowed_to(query.fields))

    if accept.kind == "sse":
        last_id = request.headers.get("last-event-id", "").strip()
        try:
            resume, unknown = (decode_versions(last_id, ids=True, clusters=_nameable(gateway))
                               if last_id else None), ""
        except StatusError:
            resume, unknown = None, last_id  # not a merged stream's id: RESET, a fresh state
        fmt: Any = MergedSSE(settings.sse_retry_ms, settings.heartbeat_interval,
                             None if query.fields_paths is None
                             else (query.fields_text, query.fields_paths), unknown)
    else:
        fmt, resume = MergedWatch(accept, query, settings.bookmark_interval), asked
    least = None
    if query.send_initial_events:  # a watch-list: the state, not older than the token
        resume, least = None, asked
    if names is not None:
        _chosen(gateway, names)  # 404 or 503 naming a cluster not served
    return await open_merged_stream(gateway, request, target, query, names, attach, fmt, resume,
                                    warnings, least)


def _query(raw: bytes, gateway: Any) -> tuple[Query, list[str] | None, dict[str, str] | None]:
    """The query, the clusters asked for, and the versions a token names (taken out first:
    a token is not one cluster's version, which the query parser would refuse)."""
    from urllib.parse import parse_qsl, urlencode

    pairs = parse_qsl(raw.decode("latin-1"), keep_blank_values=True)
    names: list[str] | None = None
    versions: dict[str, str] | None = None
    kept = []
    for key, value in pairs:
        if key == "clusters":
            names = [n.strip() for n in value.split(",") if n.strip()]
        elif key == "resourceVersion" and value not in ("", "0"):
            versions = decode_versions(value, clusters=_nameable(gateway))
        else:
            kept.append((key, value))
    return parse_query(urlencode(kept), gateway.settings.max_query_length), names, versions


# clusters a token may name beyond those configured now: removed since it was issued (the
# stream drops them: ``MergedStream``)
_REMOVED_SINCE = 8


def _nameable(gateway: Any) -> int:
    """How many clusters a token of this gateway may name: every cluster it is configured
    with, served or not, and a few removed since; a token naming more is 400."""
    configured = set(gateway.clusters) | set(gateway.unavailable) | set(gateway.connecting)
    return len(configured) + _REMOVED_SINCE


def _absent(gateway: Any, names: list[str] | None) -> list[str]:
    """A ``Warning`` for each cluster ``*`` stands for that is not served now (a cluster
    named in ``?clusters=`` answers 503 itself); why is in ``/clusters``."""
    if names is not None:
        return []
    return [f"cluster {name}: left out: "
            + ("it is being connected" if name in gateway.connecting and
               name not in gateway.unavailable else "it cannot be connected")
            for name in gateway.absent()]


def _chosen(gateway: Any, names: list[str] | None) -> list[Any]:
    """The clusters of a merged read, in name order.

    Raises:
        StatusError: 404 for a cluster named in ``?clusters=`` that is not served.
    """
    if names is None:
        return [gateway.clusters[n] for n in sorted(gateway.clusters)]
    chosen = []
    for name in sorted(set(names)):
        chosen.append(gateway.cluster(name))  # 404 or 503 naming it
    return chosen


def _ordered(parts: list[_Part],
             query: Query) -> Sequence[tuple[tuple, str, EncodedObject]]:
    """Every item with its merged place: (place, cluster, object), in the merged order."""
    if query.ordering is None:
        return _InClusterOrder([(p.cluster.name, p.objects) for p in parts])
    ordering = query.ordering
    streams = []
    for p in parts:
        name = p.cluster.name
        streams.append([((*place[:-2], name, *place[-2:]), name, o)
                        for place, o in zip(p.places, p.objects)])
    return list(heapq.merge(*streams, key=lambda item: ordering.comparable(item[0])))


class _InClusterOrder(Sequence):
    """The clusters' lists one after the other, each item (place, cluster, object) made as it
    is read: a merged list of 30,000 items holds no tuple per item, only those of the slice
    being sent (slices are views: ``[a:b]`` copies nothing)."""

    __slots__ = ("_lists", "_starts", "_start", "_stop")

    def __init__(self, lists: list[tuple[str, list[EncodedObject]]],
                 start: int = 0, stop: int | None = None) -> None:
        self._lists = lists
        self._starts = list(itertools.accumulate((len(objects) for _, objects in lists),
                                                 initial=0))
        self._start = start
        self._stop = self._starts[-1] if stop is None else stop

    def __len__(self) -> int:
        return self._stop - self._start

    def __getitem__(self, at: Any) -> Any:
        if isinstance(at, slice):
            start, stop, step = at.indices(len(self))
            if step != 1:
                raise ValueError("a merged list is sliced in order only")
            return _InClusterOrder(self._lists, self._start + start,
                                   self._start + max(start, stop))
        if at < 0:
            at += len(self)
        if not 0 <= at < len(self):
            raise IndexError(at)
        at += self._start
        which = bisect.bisect_right(self._starts, at) - 1
        name, objects = self._lists[which]
        obj = objects[at - self._starts[which]]
        return (name, obj.key), name, obj

    def __iter__(self) -> Iterator[tuple[tuple, str, EncodedObject]]:
        for name, objects in self._runs():
            for obj in objects:
                yield (name, obj.key), name, obj

    def raw_length(self) -> int:
        """The bytes of the items' cached objects (untagged)."""
        raw = _RAW
        return sum(sum(map(len, map(raw, objects))) for _, objects in self._runs())

    def _runs(self) -> Iterator[tuple[str, list[EncodedObject]]]:
        """Each cluster's objects within this slice, in order."""
        for (name, objects), begins in zip(self._lists, self._starts):
            ends = begins + len(objects)
            if ends <= self._start or begins >= self._stop:
                continue
            yield name, objects[max(self._start - begins, 0):self._stop - begins]


def _place_of(token: str, fingerprint: str) -> list:
    """The merged place a continue token resumes after (the codec of one cluster's lists,
    its place the merged one: cluster included)."""
    _, place = decode_continue(token, fingerprint)
    if place is None:
        raise bad_request("invalid continue token: it holds no place in a merged list; "
                          "start the list again without 'continue'")
    return place


def _after(ordered: list[tuple], place: list, query: Query) -> int:
    """The index of the first item after ``place`` (a merged place read back from a token)."""
    bisect_right = bisect.bisect_right
    if query.ordering is None:
        if len(place) != 2 or not all(isinstance(x, str) for x in place):
            raise bad_request("invalid continue token: it holds no place in this list")
        return bisect_right(ordered, (place[0], place[1]), key=lambda item: item[0])
    keys = len(query.ordering.keys)
    if len(place) != keys + 3 or not isinstance(place[keys], str):
        raise bad_request("invalid continue token: it holds no place in this sort order")
    checked = query.ordering.check_place([*place[:keys], *place[keys + 1:]])
    if checked is None:
        raise bad_request("invalid continue token: it holds no place in this sort order")
    position = (*checked[:keys], place[keys], *checked[keys:])
    comparable = query.ordering.comparable
    return bisect_right(ordered, comparable(position), key=lambda item: comparable(item[0]))


def _summary(parts: list[_Part], query: Query, versions: dict[str, str]) -> bytes:
    """Each cluster's counts added up; by the cluster annotation, each cluster's total."""
    total = 0
    counts: dict[str, dict[str, int]] = {}
    for part in parts:
        doc = orjson.loads(part.summary) if part.summary else {"total": 0, "counts": {}}
        total += doc["total"]
        for path in query.summary or ():
            into = counts.setdefault(path.text, {})
            if path.text == _ANNOTATION_PATH:
                if doc["total"]:
                    into[part.cluster.name] = into.get(part.cluster.name, 0) + doc["total"]
                continue
            for value, count in (doc["counts"].get(path.text) or {}).items():
                into[value] = into.get(value, 0) + count
    return orjson.dumps({"apiVersion": "v1", "kind": "Summary",
                         "metadata": {"resourceVersion": encode_versions(versions)},
                         "total": total, "counts": {k: dict(sorted(v.items()))
                                                    for k, v in counts.items()}})

