"""Merged streams: a watch or an event stream of several clusters at once (``/clusters/*/``).

A merged stream follows the resource in every cluster it names (``*``: every cluster the
gateway serves, as they come and go), each through that cluster's own hub, subscription,
grant and re-checks, as a stream of one cluster does (``app.streams.pipeline``). What it
adds is where the client stands in all of them at once.

Positions. For each cluster the stream knows the version (watch) or the event id (SSE)
the client has reached there; every event carries all of them as one token
(``app.clusters.merging``): as its object's ``metadata.resourceVersion`` on a watch
(client-go resumes from the last object's), as its id on an event stream. A resume from
a token resumes each cluster from its own position, exactly as a stream of that cluster
would (the ring, its points, a version given by another process); one position too old
ends a watch with ``ERROR`` 410 (the client lists again) and gives an event stream
``RESET`` and the whole state again. While a cluster's objects are first being sent its
position is one nothing resumes from: a resume half-way through is told to start again.

Clusters taken in. A cluster the client has nothing of — added to the gateway while the
stream is open, back after its API server or its reviews failed, serving the resource
only now, or new since the token — comes as ``ADDED`` for each of its matching objects
(on an event stream followed by ``SYNCED`` naming it), then live. A cluster the stream
lacks is tried again every ``RETRY_EVERY`` seconds and at once when the gateway's
clusters change, in the background: one that is slow to answer never holds back the
others' events. A cluster in the token that is away resumes from its position when it
comes back.

Clusters let go. A cluster removed from the gateway, whose resource went away, or whose
caller may no longer read it there (or whose reviews fail: closed, never open) comes as
``DELETED`` for each object the client has from it (its state as of the last event sent,
rewound from the hub's view and ring), each object carrying only what names it: kind,
name, namespace and the cluster annotation, nothing the caller may no longer read. It is
then tried again as any cluster the stream lacks.

What ends the whole stream: the caller's identity refused (401) or their namespaces
changed (410: list again), a cluster's events coming faster than the client reads
(as for one cluster), ``timeoutSeconds``, the gateway stopping.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from app.cache.answer_age import warning_header
from app.cache.event import Event, parse_rv
from app.cache.hub import EventHub
from app.cache.subscriber import Subscriber
from app.cache.signal import Signal
from app.cache.requested_version import FRESHNESS_WAIT, fresh_enough
from app.clusters.merging import CLUSTER_ANNOTATION, encode_versions, tagged, tagged_dict
from app.kube.partial import answer_type, partial
from app.kube.request import Accept, Query
from app.kube.status import StatusError, status_body
from app.kube.table import table_bytes
from app.query.projection import Projection
from app.query.selection import Selection
from app.streams.live import RECHECK_AT_MOST_EVERY, pieces
from app.streams.pipeline import StreamBody
from app.streams.watch import INITIAL_EVENTS_END
from informer_core.encoded import EncodedObject

__all__ = ["RETRY_EVERY", "MergedSSE", "MergedWatch", "open_merged_stream"]

log = logging.getLogger(__name__)

RETRY_EVERY = 2.0  # seconds between two tries to take in the clusters a stream lacks
_CHUNK = 256  # objects per write of a cluster's first state
_SENDING = "0"  # a watch position while a cluster's objects are first sent: resumed by none
_NAMES = {"ADDED": b"ADDED", "MODIFIED": b"MODIFIED", "DELETED": b"DELETED",
          "DELETED_OLD": b"DELETED"}

# (cluster, wait for its sync) -> app.http.merged.Reached, or a StatusError / None: not now
Attach = Callable[[Any, bool], Awaitable[Any]]


class Member:
    """One cluster's part of a merged stream."""

    __slots__ = ("cluster", "entry", "grant", "subscriber", "recheck", "at", "sent_seq",
                 "checking")

    def __init__(self, cluster: Any, entry: Any, grant: Any, subscriber: Subscriber) -> None:
        self.cluster, self.entry, self.grant, self.subscriber = cluster, entry, grant, subscriber
        self.recheck = max(grant.expires, time.monotonic() + RECHECK_AT_MOST_EVERY)
        self.at = ""  # where the client stands here: a version (watch) or an event id (SSE)
        self.sent_seq = 0  # the hub's last event the client has (see ``MergedStream.holding``)
        self.checking: asyncio.Task | None = None  # its access checked again, in the background

    @property
    def name(self) -> str:
        return self.cluster.name

    @property
    def hub(self) -> EventHub:
        return self.entry.hub


class MergedStream:
    """One merged stream's members, positions and loop; see the module."""

    def __init__(self, gateway: Any, request: Request, target: Any, query: Query,
                 names: list[str] | None, attach: Attach, fmt: Any,
                 resume: dict[str, str] | None) -> None:
        self.gateway, self.target, self.query, self.names = gateway, target, query, names
        self.attach, self.fmt = attach, fmt
        self.client = request.client.host if request.client else ""
        self.members: dict[str, Member] = {}
        # positions of clusters in the client's token that the stream has not taken in yet:
        # only of clusters it may serve (the gateway's, of ?clusters= when given), so that
        # what the stream echoes on every event is bounded by the clusters it serves
        may = (set(gateway.clusters) | set(gateway.unavailable) | set(gateway.connecting))
        if names is not None:
            may &= set(names)
        self.resume: dict[str, str] = {n: at for n, at in (resume or {}).items() if n in may}
        self.resumed = resume is not None
        self.wakeup = Signal()
        self.fell_behind = Signal()  # set with any member's overflow: StreamBody's cut-off
        self.finished = False  # the stream's last words were said (a watch's 410)
        self.hung_up = False  # the client went away (StreamBody): nobody to tell
        self._attaching: asyncio.Task | None = None
        self._next_try = 0.0
        self._seen_clusters = -1

    # -- positions --------------------------------------------------------------------

    def token(self) -> str:
        """Every cluster's position (those not taken in yet: as the client's token said)."""
        positions = {n: m.at for n, m in self.members.items()}
        positions.update({n: v for n, v in self.resume.items() if n not in positions})
        return encode_versions(positions)

    # -- taking clusters in -----------------------------------------------------------

    def wanted(self) -> list[str]:
        """The clusters this stream follows now, in name order."""
        return sorted(self.names) if self.names is not None else sorted(self.gateway.clusters)

    async def reach_missing(self, wait: bool) -> list[Any]:
        """Reach every wanted cluster the stream lacks; those ready to be taken in, caught up
        to their positions (``wait``: as at the start, syncs waited for)."""
        clusters = self.gateway.clusters
        missing = [clusters[n] for n in self.wanted() if n not in self.members and n in clusters]
        answers = await asyncio.gather(*(self.attach(c, wait) for c in missing))
        ready = [a for a in answers if a is not None and not isinstance(a, StatusError)]
        for reached in ready:
            hub = reached.entry.hub
            selection = self.selection(reached.grant)
            at = self.resume.get(reached.cluster.name, "")
            if at.isdigit() and parse_rv(at) > hub.rv:
                await hub.placed(parse_rv(at), FRESHNESS_WAIT)  # given by another process
            await reached.entry.queries.warm(hub, selection)
            await hub.between_bursts()
        return ready

    def selection(self, grant: Any) -> Selection:
        query = self.query
        return Selection(self.target.namespace, query.labels, query.fields, grant.namespaces,
                         query.filters)

    def take_in(self, reached: list[Any], fresh: bool = False) -> Iterator[bytes]:
        """Begin the clusters ``reached`` gave (no ``await`` from a first state or replay to
        its subscription: nothing missed or doubled) and return their first bytes.

        ``fresh``: the stream's first words (an event stream's state ends with ``SYNCED``).
        A position too old anywhere: a watch's ``ERROR`` 410; an event stream's ``RESET``,
        then every cluster's state again.
        """
        fmt = self.fmt
        begun: list[tuple[Member, Any]] = []
        expired: list[str] = []
        for found in reached:
            name = found.cluster.name
            if name in self.members or self.gateway.clusters.get(name) is not found.cluster \
                    or not found.entry.usable():
                continue  # taken in meanwhile, gone, or its cache unloaded: tried again later
            subscriber = Subscriber(self.selection(found.grant), self.gateway.settings.subscriber_queue,
                                    self.client, wakeup=self.wakeup, fell_behind=self.fell_behind)
            member = Member(found.cluster, found.entry, found.grant, subscriber)
            at = self.resume.pop(name, "")
            start = None
            if at:
                start = fmt.start(member, at)
                if start is None:
                    expired.append(name)
                else:
                    member.at = at
            elif fmt.without_state:  # a watch from now (sendInitialEvents=false)
                start, member.at = ([], 0), fmt.position(member.hub)
            begun.append((member, start))
            self.members[name] = member
        self.members = dict(sorted(self.members.items()))
        if expired and not fmt.restarts:
            for member, _ in begun:
                del self.members[member.name]
            self.finished = True
            return iter([fmt.expired(expired)])
        if expired:  # an event stream: every cluster's state again, after RESET
            self.resume.clear()  # the client starts again: a cluster taken in later is new to it
            chunks: list[Iterable[bytes]] = [[fmt.expired(expired)]]
            begun = [(m, None) for m in self.members.values()]
            for member, _ in begun:
                member.hub.unsubscribe(member.subscriber)
                member.subscriber.take()
            fresh = True
        else:
            chunks = []
        for member, start in begun:
            if start is None:
                chunks.append(self._state(member, named=not fresh))
            else:
                events, since = start
                missed = member.subscriber.replay(events)
                member.subscriber.since = since
                if missed:
                    chunks.append([fmt.events(self, member, missed)])
            member.hub.subscribe(member.subscriber)
            member.sent_seq = member.subscriber.after_seq
        if fresh:
            # made when it is sent, after every state: its id then names where each cluster
            # stands (made now, it named "" for every cluster, and no resume took it); an
            # event stream's SYNCED, a watch-list's initial-events-end bookmark
            chunks.append(self._synced())
        return (chunk for part in chunks for chunk in part)

    def _synced(self) -> Iterator[bytes]:
        last = self.fmt.synced(self, "")
        if last:
            yield last

    def _state(self, member: Member, named: bool) -> Iterator[bytes]:
        """A cluster's matching objects as ``ADDED``, joined a slice at a time (``named``:
        then an event stream's ``SYNCED`` naming the cluster)."""
        hub = member.hub
        objects = member.entry.queries.snapshot(hub, member.subscriber.selection)
        final = self.fmt.position(hub)
        sending = self.fmt.sending(hub)

        def chunks() -> Iterator[bytes]:
            member.at = sending
            for start in range(0, len(objects), _CHUNK):
                yield self.fmt.added(self, member, objects[start:start + _CHUNK])
            member.at = final
            last = self.fmt.synced(self, member.name) if named else None
            if last:
                yield last

        return chunks()

    def holding(self, member: Member) -> list[EncodedObject]:
        """The objects the client holds from ``member``: the hub's view rewound to the last
        event sent (every later one undone: a newer object is its older state, one added
        is absent, one deleted present), as it matched the stream's selection."""
        hub = member.hub
        selection = member.subscriber.selection
        later = hub.events_after_seq(member.sent_seq) or []
        undone: dict[str, EncodedObject | None] = {}
        for event in reversed(later):
            undone[event.obj.key] = (None if event.type == "ADDED" else
                                     event.old if event.type == "MODIFIED" else event.obj)
        held = [o for k, o in hub.view.items() if k not in undone and selection.matches(o)]
        held.extend(o for o in undone.values() if o is not None and selection.matches(o))
        held.sort(key=lambda o: o.key)
        return held

    def let_go(self, member: Member) -> bytes:
        """``member`` out of the stream: ``DELETED`` for what the client holds from it."""
        member.subscriber.take()
        member.hub.unsubscribe(member.subscriber)
        if member.checking is not None:
            member.checking.cancel()
        held = self.holding(member)
        del self.members[member.name]
        self._next_try = 0.0
        return self.fmt.deleted(self, member, held)

    # -- the loop -----------------------------------------------------------------------

    def _try_missing(self, now: float) -> None:
        """Begin reaching the clusters the stream lacks, when it is time to."""
        changed = self.gateway.clusters_version != self._seen_clusters
        if self._attaching is not None or (now < self._next_try and not changed):
            return
        self._seen_clusters = self.gateway.clusters_version
        if not [n for n in self.wanted() if n not in self.members]:
            self._next_try = now + RETRY_EVERY
            return
        self._attaching = asyncio.get_running_loop().create_task(self.reach_missing(False))
        self._attaching.add_done_callback(lambda _t: self.wakeup.set())

    def tried(self) -> None:
        """The clusters the stream lacks were just tried: the next try is in ``RETRY_EVERY``
        seconds, or when the gateway's clusters change."""
        self._seen_clusters = self.gateway.clusters_version
        self._next_try = time.monotonic() + RETRY_EVERY

    def _taken(self) -> list[Any]:
        task, self._attaching = self._attaching, None
        self._next_try = time.monotonic() + RETRY_EVERY
        if task.cancelled() or task.exception() is not None:
            if not task.cancelled():
                log.warning("a merged stream could not reach a cluster: %s", task.exception())
            return []
        return task.result()

    async def run(self, first: Iterable[bytes]) -> AsyncIterator[bytes]:
        """The stream's bytes (see the module); its teardown, however it ends."""
        gateway, fmt, query = self.gateway, self.fmt, self.query
        deadline = time.monotonic() + query.timeout_seconds if query.timeout_seconds else None
        closing = gateway.closing
        gateway.clusters_changed.add(self.wakeup)
        try:
            for chunk in first:
                if self.hung_up:
                    return
                yield chunk
            if self.finished:
                return
            while not closing.is_set() and not self.hung_up:
                now = time.monotonic()
                if self._attaching is not None and self._attaching.done():
                    reached = self._taken()
                    for chunk in self.take_in(reached):
                        yield chunk
                    if self.finished:
                        return
                self._try_missing(now)
                for member in list(self.members.values()):
                    refusal = self._recheck(member, now)
                    if refusal is not None:
                        if refusal.code in (401, 410):  # the caller, not the cluster
                            yield fmt.refused(refusal)
                            return
                        yield self.let_go(member)
                idle = await self._wait(now, deadline)
                if self.hung_up:
                    return
                for member in list(self.members.values()):
                    batch = member.subscriber.take()
                    if batch:
                        member.sent_seq = batch[-1][0].seq
                        for piece in pieces(batch):
                            yield fmt.events(self, member, piece)
                    subscriber = member.subscriber
                    if subscriber.overflowed:
                        gateway.metrics.stream_cut_off(fmt.name)
                        yield fmt.ended("behind")
                        return
                    if subscriber.closed:
                        if subscriber.error is None:  # unloaded or stopping
                            yield fmt.ended("unloaded")
                            return
                        yield self.let_go(member)  # its cluster or its resource went away
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    return
                due = fmt.tick(self, now, idle)
                if due:
                    yield due
            if not self.hung_up:
                yield fmt.ended("shutdown")
        finally:
            gateway.clusters_changed.discard(self.wakeup)
            if self._attaching is not None:
                self._attaching.cancel()
            for member in self.members.values():
                member.hub.unsubscribe(member.subscriber)
                if member.checking is not None:
                    member.checking.cancel()
            gateway.limiter.release(self.client)
            gateway.metrics.stream_closed(fmt.name)

    def hang_up(self) -> None:
        """The client's connection is gone (``StreamBody``): end the stream now."""
        self.hung_up = True
        self.wakeup.set()

    def _recheck(self, member: Member, now: float) -> StatusError | None:
        """Check ``member``'s access again when its decision has expired: in the background,
        so that a cluster slow to answer its reviews holds back no other cluster's events.
        Returns the refusal of a check that came back refused."""
        task = member.checking
        if task is None:
            authorization = member.cluster.authorization
            if now >= member.recheck or not authorization.current(member.grant):
                granted = authorization.regranted(member.grant)  # from the caches, if they can
                if granted is not None:
                    member.grant = granted
                    member.recheck = max(granted.expires, now + RECHECK_AT_MOST_EVERY)
                    return None
                member.checking = asyncio.get_running_loop().create_task(
                    member.cluster.authorization.reauthorize(member.grant))
                member.checking.add_done_callback(lambda _t: self.wakeup.set())
            return None
        if not task.done():
            return None
        member.checking = None
        error = task.exception()
        if error is None:
            member.grant = task.result()
            member.recheck = max(member.grant.expires, time.monotonic() + RECHECK_AT_MOST_EVERY)
            return None
        if isinstance(error, StatusError):
            return error
        log.warning("a merged stream's check of cluster %s failed: %s", member.name, error)
        return StatusError(503, f"cluster {member.name}: the access could not be checked",
                           "ServiceUnavailable")

    async def _wait(self, now: float, deadline: float | None) -> bool:
        """Wait for an event, a cluster taken in, a tick or a re-check; whether none came."""
        if any(m.subscriber.waiting or m.subscriber.closed or m.subscriber.overflowed
               for m in self.members.values()) or (
                self._attaching is not None and self._attaching.done()):
            return False
        if any(m.checking is not None and m.checking.done() or m.checking is None and
               not m.cluster.authorization.current(m.grant) for m in self.members.values()):
            return False
        times = [deadline, self.fmt.next_tick(now), self._next_try if self._attaching is None
                 else None, *(m.recheck for m in self.members.values() if m.checking is None)]
        waits = [t - now for t in times if t is not None and t != math.inf]
        self.wakeup.clear()
        if not await self.wakeup.wait(max(0.0, min(waits)) if waits else None):
            return True
        return not any(m.subscriber.waiting for m in self.members.values())


async def open_merged_stream(gateway: Any, request: Request, target: Any, query: Query,
                             names: list[str] | None, attach: Attach, fmt: Any,
                             resume: dict[str, str] | None, warnings: list[str],
                             not_older_than: dict[str, str] | None = None) -> Response:
    """Admit and start a merged stream (see the module); ``not_older_than``: each cluster's
    version its first state must have reached (a watch-list's token).

    Raises:
        StatusError: 404 when no cluster serves the resource, 403 when the caller may read
            it in none (a stream that can wait for a cluster still syncing, away, or not
            connected yet opens without it, and takes it in when it can).
    """
    client = request.client.host if request.client else ""
    refusal = gateway.limiter.acquire(client)
    if refusal is not None:
        return fmt.refuse(f"too many open streams: {refusal}")
    try:
        stream = MergedStream(gateway, request, target, query, names, attach, fmt, resume)
        clusters = [gateway.cluster(n) for n in stream.wanted()]
        answers = await asyncio.gather(*(attach(c, True) for c in clusters))
        refusals = [a for a in answers if isinstance(a, StatusError)]
        if all(a is None or isinstance(a, StatusError) for a in answers):
            # a cluster configured but not connected yet may serve it: the stream waits for it
            if not refusals and not (names is None and gateway.absent()):
                raise StatusError(404, f"no cluster serves the resource of {request.scope['path']}: "
                                       f"{'; '.join(warnings)}", "NotFound")
            if refusals and all(r.code == 403 for r in refusals):
                raise refusals[0]
        reached = [a for a in answers if a is not None and not isinstance(a, StatusError)]
        for found in reached:  # caught up as in reach_missing, with the start's waits
            hub = found.entry.hub
            at = stream.resume.get(found.cluster.name, "")
            if at.isdigit() and parse_rv(at) > hub.rv:
                await hub.placed(parse_rv(at), FRESHNESS_WAIT)
            least = (not_older_than or {}).get(found.cluster.name, "")
            if least.isdigit():  # a watch-list's state: not older than the token, as a list
                await fresh_enough(hub, dataclasses.replace(query, resource_version=least),
                                   listing=False)
            await found.entry.queries.warm(hub, stream.selection(found.grant))
            await hub.between_bursts()
    except BaseException:
        gateway.limiter.release(client)
        raise
    gateway.metrics.stream_opened(fmt.name)
    stream.tried()
    begun = stream.take_in(reached, fresh=not stream.resumed)
    headers = dict(fmt.headers)
    if warnings:
        headers["Warning"] = warning_header(sorted(warnings))
    first = (chunk for part in ([fmt.first_words()], begun) for chunk in part if chunk)
    return StreamBody(stream.run(first), stream, gateway.settings.stall_timeout,
                      media_type=fmt.media_type, headers=headers)


# -- the two wire formats ----------------------------------------------------------------

def _identity(member: Member, obj: EncodedObject) -> dict[str, Any]:
    """What names an object the client may no longer read: nothing more."""
    resource = member.entry.resource
    meta: dict[str, Any] = {"name": obj.name, "annotations": {CLUSTER_ANNOTATION: member.name}}
    if obj.namespace:
        meta["namespace"] = obj.namespace
    return {"apiVersion": resource.api_version, "kind": resource.kind, "metadata": meta}


class MergedWatch:
    """A merged stream in the watch protocol: every object's version is the stream's token."""

    name = "watch"
    media_type = "application/json"
    headers = {"Cache-Control": "no-cache, private", "X-Content-Type-Options": "nosniff"}
    restarts = False  # a position too old: ERROR 410, and the client lists again

    def __init__(self, accept: Accept, query: Query, bookmark_interval: float) -> None:
        self.accept, self.query = accept, query
        self.without_state = query.send_initial_events is False  # live events only
        self._table_headers_sent = False
        self._interval = bookmark_interval
        self._next_bookmark = (time.monotonic() + bookmark_interval if query.allow_bookmarks
                               else None)

    def refuse(self, message: str) -> Response:
        raise StatusError(429, message, "TooManyRequests", headers={"Retry-After": "1"})

    def first_words(self) -> bytes:
        return b""

    def start(self, member: Member, at: str) -> tuple[list[Event], int] | None:
        """Resume ``member`` from version ``at``: the events after it and the version up to
        which changes are the client's already; ``None``: too old (410)."""
        hub = member.hub
        version = parse_rv(at)
        events = hub.events_after_rv(version, watch=True)
        if events is not None:
            return events, 0
        if hub.ahead_of(version):
            return [], version
        return None

    def position(self, hub: EventHub) -> str:
        return str(hub.exact if hub.exact is not None else hub.rv)

    def sending(self, hub: EventHub) -> str:
        return _SENDING

    def _projection(self, member: Member) -> Projection | None:
        if self.query.fields_paths is None or self.accept.kind in ("table", "meta"):
            return None
        return member.entry.queries.projection(self.query.fields_text, self.query.fields_paths)

    def _line(self, kind: bytes, member: Member, raw: bytes, token: str) -> bytes:
        if self.accept.kind == "table":
            obj = tagged_dict(raw, member.name, token)
            table = table_bytes([obj], member.entry.printer, table_version=self.accept.table_version,
                                include=self.query.include_object,
                                headers=not self._table_headers_sent, resource_version=token)
            self._table_headers_sent = True
            return b'{"type":"' + kind + b'","object":' + table + b"}\n"
        obj = tagged(raw, member.name, token)
        if self.accept.kind == "meta":
            obj = partial(obj, self.accept.table_version)
        return b'{"type":"' + kind + b'","object":' + obj + b"}\n"

    def added(self, stream: MergedStream, member: Member, objects: list[EncodedObject]) -> bytes:
        token = stream.token()
        project = self._projection(member)
        return b"".join(self._line(b"ADDED", member, o.raw if project is None else project.bytes_of(o),
                                   token) for o in objects)

    def synced(self, stream: MergedStream, name: str) -> bytes | None:
        """After the whole first state of a watch-list: its bookmark, at the stream's token
        (a cluster taken in later has no end to mark: its objects come as live events)."""
        if name or not (self.query.send_initial_events and self.query.allow_bookmarks):
            return None
        member = next(iter(stream.members.values()), None)
        if member is None:
            return None  # nothing reached yet: there is no state to end
        return self._bookmark(member, stream.token(), {INITIAL_EVENTS_END: "true"})

    def _bookmark(self, member: Member, token: str, annotations: dict | None = None) -> bytes:
        """A BOOKMARK of the resource's kind (or ``PartialObjectMetadata``) at ``token``."""
        res = member.entry.resource
        kind, api_version = answer_type(res, self.accept, listing=False)
        meta: dict[str, Any] = {"resourceVersion": token}
        if annotations:
            meta["annotations"] = annotations
        return orjson.dumps({"type": "BOOKMARK", "object": {
            "kind": kind, "apiVersion": api_version, "metadata": meta}}) + b"\n"

    def events(self, stream: MergedStream, member: Member, batch: list[tuple[Event, str]]) -> bytes:
        project = self._projection(member)
        lines = []
        for event, kind in batch:
            member.at = str(event.rv)
            raw = event.object_bytes(kind, "watch")
            if project is not None:
                raw = project.raw_of(raw)
            lines.append(self._line(_NAMES[kind], member, raw, stream.token()))
        return b"".join(lines)

    def deleted(self, stream: MergedStream, member: Member, objects: list[EncodedObject]) -> bytes:
        token = stream.token()
        return b"".join(self._line(b"DELETED", member, orjson.dumps(_identity(member, o)), token)
                        for o in objects)

    def expired(self, names: list[str]) -> bytes:
        return orjson.dumps({"type": "ERROR", "object": status_body(
            410, f"too old resource version for cluster {', '.join(names)}: list again",
            "Expired")}) + b"\n"

    def next_tick(self, now: float) -> float | None:
        return self._next_bookmark

    def tick(self, stream: MergedStream, now: float, idle: bool) -> bytes | None:
        if self._next_bookmark is None or now < self._next_bookmark:
            return None
        members = list(stream.members.values())
        if any(m.subscriber.waiting for m in members) or any(m.at == _SENDING for m in members):
            return None  # events came while the last ones were sent: a bookmark would pass them
        self._next_bookmark = now + self._interval
        for member in members:
            if member.hub.exact is not None and parse_rv(member.at) < member.hub.exact:
                member.at = str(member.hub.exact)
        if not members:
            return None
        return self._bookmark(members[0], stream.token())

    def ended(self, why: str) -> bytes | None:
        return None  # the client watches again from its last token

    def refused(self, error: StatusError) -> bytes:
        return orjson.dumps({"type": "ERROR", "object": error.body()}) + b"\n"


class MergedSSE:
    """A merged stream as Server-Sent Events: every id is the stream's token."""

    name = "sse"
    without_state = False
    media_type = "text/event-stream"
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "Connection": "keep-alive"}
    restarts = True  # a position too old: RESET, and the whole state again

    def __init__(self, retry_ms: int, heartbeat: float,
                 fields: tuple[str, tuple[Any, ...]] | None = None, unknown_id: str = "") -> None:
        """``unknown_id``: a ``Last-Event-ID`` no merged stream gave (the stream begins with
        ``RESET``)."""
        self._retry_ms, self._heartbeat, self._fields = retry_ms, heartbeat, fields
        self._unknown_id = unknown_id

    def _retry(self) -> bytes:
        return b"retry: " + str(self._retry_ms).encode() + b"\n\n"

    def refuse(self, message: str) -> Response:
        """A 200 stream with ``retry:`` and ERROR 429: EventSource gives up on any other answer."""
        async def once() -> AsyncIterator[bytes]:
            yield self._retry() + self.refused(StatusError(429, message, "TooManyRequests"))

        return StreamingResponse(once(), media_type=self.media_type, headers=self.headers)

    def first_words(self) -> bytes:
        if not self._unknown_id:
            return self._retry()
        return self._retry() + b"event: RESET\ndata: " + orjson.dumps(
            {"reason": "the id is not a merged stream's; a fresh state follows",
             "lastEventId": self._unknown_id[:128]}) + b"\n\n"

    def start(self, member: Member, at: str) -> tuple[list[Event], int] | None:
        """Resume ``member`` after event id ``at``; ``None``: unknown or too old (RESET)."""
        hub = member.hub
        events = hub.events_after_id(at)
        if events is not None:
            return events, 0
        if at.isdigit() and hub.ahead_of(parse_rv(at)):
            return [], parse_rv(at)
        return None

    def position(self, hub: EventHub) -> str:
        return hub.position_id()

    def sending(self, hub: EventHub) -> str:
        return f"{hub.id}.{hub.seq}~"  # not an id any hub resumes from

    def _data(self, member: Member, raw: bytes) -> bytes:
        if self._fields is not None:
            raw = member.entry.queries.projection(*self._fields).raw_of(raw)
        return tagged(raw, member.name)

    def added(self, stream: MergedStream, member: Member, objects: list[EncodedObject]) -> bytes:
        head = b"id: " + stream.token().encode() + b"\nevent: ADDED\ndata: "
        return b"".join(head + self._data(member, o.raw) + b"\n\n" for o in objects)

    def synced(self, stream: MergedStream, name: str) -> bytes | None:
        token = stream.token()
        data = {"resourceVersion": token, **({"cluster": name} if name else {})}
        return (b"id: " + token.encode() + b"\nevent: SYNCED\ndata: " + orjson.dumps(data)
                + b"\n\n")

    def events(self, stream: MergedStream, member: Member, batch: list[tuple[Event, str]]) -> bytes:
        parts = []
        fields = self._fields[0] if self._fields is not None else ""
        for event, kind in batch:
            member.at = event.id
            data = member.hub.copies.get(
                event, f"{kind}|{fields}",
                lambda e=event, k=kind: self._data(member, e.object_bytes(k, "sse")))
            parts.append(b"id: " + stream.token().encode() + b"\nevent: " + _NAMES[kind]
                         + b"\ndata: " + data + b"\n\n")
        return b"".join(parts)

    def deleted(self, stream: MergedStream, member: Member, objects: list[EncodedObject]) -> bytes:
        head = b"id: " + stream.token().encode() + b"\nevent: DELETED\ndata: "
        return b"".join(head + orjson.dumps(_identity(member, o)) + b"\n\n" for o in objects)

    def expired(self, names: list[str]) -> bytes:
        return b"event: RESET\ndata: " + orjson.dumps(
            {"reason": f"the id is unknown or too old for cluster {', '.join(names)}; a fresh "
                       f"state follows", "clusters": names}) + b"\n\n"

    def next_tick(self, now: float) -> float | None:
        return now + self._heartbeat

    def tick(self, stream: MergedStream, now: float, idle: bool) -> bytes | None:
        return b": heartbeat\n\n" if idle else None

    def ended(self, why: str) -> bytes | None:
        words = {"behind": (429, "this stream fell behind and was ended; reconnect with "
                                 "Last-Event-ID to resume", "TooManyRequests"),
                 "unloaded": (503, "a cluster's cache was unloaded; reconnect with "
                                   "Last-Event-ID to resume", "ServiceUnavailable"),
                 "shutdown": (503, "the gateway is shutting down; reconnect",
                              "ServiceUnavailable")}[why]
        return self._retry() + self.refused(StatusError(*words))

    def refused(self, error: StatusError) -> bytes:
        return b"event: ERROR\ndata: " + orjson.dumps(error.body()) + b"\n\n"
