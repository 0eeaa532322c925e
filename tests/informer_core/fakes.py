"""Fakes for injecting faults into reflector and informer logic (never the only proof)."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from typing import Any

from informer_core.errors import ResourceExpiredError
from informer_core.listwatch import ListOptions, ListPage, WatchEvent


def obj(name: str, namespace: str = "ns", labels: dict | None = None, **extra: Any) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, **extra}


class FakeWatchStream:
    """Replays history after a version, then waits for live events until stopped or closed."""

    def __init__(self, fake: FakeListerWatcher, since: int) -> None:
        self._fake = fake
        self._next = since  # index into fake.history of the next event to send
        self._stopped = False

    def stop(self) -> None:
        with self._fake.cond:
            self._stopped = True
            self._fake.cond.notify_all()

    def __iter__(self) -> Iterator[WatchEvent]:
        fake = self._fake
        while True:
            with fake.cond:
                while (not self._stopped and self._next >= len(fake.history)
                       and self not in fake.close_requests and self not in fake.break_requests):
                    fake.cond.wait()
                if self._stopped:
                    return
                if self in fake.break_requests:
                    fake.break_requests.discard(self)
                    raise ConnectionError("stream broken (injected)")
                if self._next < len(fake.history):
                    event = fake.history[self._next]
                    self._next += 1
                elif self in fake.close_requests:
                    fake.close_requests.discard(self)
                    return  # a clean server-side close
                else:
                    continue
            yield WatchEvent(event.type, copy.deepcopy(event.object))


class FakeListerWatcher:
    """An in-memory API server for one resource.

    ``history[i]`` is the event that produced resourceVersion ``i + 1``. Faults:
    ``list_errors`` / ``watch_errors`` (raised by the next calls, in order),
    ``expire_before`` (versions below it answer 410), ``close_watches()``,
    ``break_watches()``, ``send_error(status)`` and ``send_bookmark()``.
    """

    def __init__(self, objects: list[dict] | None = None) -> None:
        self.cond = threading.Condition()  # guards everything below
        self.objects: dict[str, dict] = {}
        self.history: list[WatchEvent] = []
        self.list_calls: list[ListOptions] = []
        self.watch_calls: list[ListOptions] = []
        self.list_errors: list[BaseException] = []
        self.watch_errors: list[BaseException] = []
        self.expire_before = 0
        self.streams: list[FakeWatchStream] = []
        self.close_requests: set[FakeWatchStream] = set()
        self.break_requests: set[FakeWatchStream] = set()
        self.block_lists = threading.Event()  # set: lists block until released
        self.release_lists = threading.Event()
        for o in objects or []:
            self.create(o)

    # -- mutations -----------------------------------------------------------

    @property
    def rv(self) -> int:
        return len(self.history)

    def _key(self, o: dict) -> str:
        meta = o["metadata"]
        return f"{meta.get('namespace', '')}/{meta['name']}" if meta.get("namespace") else meta["name"]

    def _record(self, kind: str, o: dict) -> dict:
        o = copy.deepcopy(o)
        o["metadata"]["resourceVersion"] = str(len(self.history) + 1)
        self.history.append(WatchEvent(kind, o))
        self.cond.notify_all()
        return o

    def create(self, o: dict) -> dict:
        with self.cond:
            stored = self._record("ADDED", o)
            self.objects[self._key(o)] = stored
            return stored

    def update(self, o: dict) -> dict:
        with self.cond:
            stored = self._record("MODIFIED", o)
            self.objects[self._key(o)] = stored
            return stored

    def delete(self, o: dict) -> None:
        with self.cond:
            key = self._key(o)
            last = self.objects.pop(key)
            self._record("DELETED", last)

    def mutate_silently(self, create=(), update=(), delete=()) -> None:
        """Change objects without watch events reaching current streams (a missed gap)."""
        with self.cond:
            for o in create:
                self.create(o)
            for o in update:
                self.update(o)
            for o in delete:
                self.delete(o)
            self.expire_before = self.rv  # old versions can no longer be watched from

    def send_bookmark(self) -> None:
        with self.cond:
            self.history.append(WatchEvent("BOOKMARK", {
                "kind": "ConfigMap", "metadata": {"resourceVersion": str(len(self.history) + 1)}}))
            self.cond.notify_all()

    def send_error(self, code: int = 410, reason: str = "Expired") -> None:
        with self.cond:
            self.history.append(WatchEvent("ERROR", {
                "kind": "Status", "status": "Failure", "code": code, "reason": reason,
                "message": "too old resource version (injected)"}))
            self.cond.notify_all()

    def close_watches(self) -> None:
        with self.cond:
            self.close_requests.update(self.streams)
            self.cond.notify_all()

    def break_watches(self) -> None:
        with self.cond:
            self.break_requests.update(self.streams)
            self.cond.notify_all()

    # -- the ListerWatcher protocol ---------------------------------------------

    def list(self, options: ListOptions) -> ListPage:
        with self.cond:
            self.list_calls.append(options)
            if self.list_errors:
                raise self.list_errors.pop(0)
            rv = options.resource_version
            if rv not in ("", "0") and int(rv) < self.expire_before:
                raise ResourceExpiredError("too old resource version (injected)")
        if self.block_lists.is_set():
            self.release_lists.wait()
        with self.cond:
            items = sorted(self.objects.values(), key=self._key)
            start = int(options.continue_token.split(":")[0]) if options.continue_token else 0
            snapshot = options.continue_token.split(":")[1] if options.continue_token else str(self.rv)
            if options.limit:
                page = items[start:start + options.limit]
                more = start + options.limit < len(items)
                token = f"{start + options.limit}:{snapshot}" if more else ""
            else:
                page, token = items, ""
            return ListPage([copy.deepcopy(i) for i in page], snapshot, token)

    def watch(self, options: ListOptions) -> FakeWatchStream:
        with self.cond:
            self.watch_calls.append(options)
            if self.watch_errors:
                raise self.watch_errors.pop(0)
            rv = int(options.resource_version or 0)
            if rv < self.expire_before:
                raise ResourceExpiredError("too old resource version (injected)")
            stream = FakeWatchStream(self, rv)
            self.streams.append(stream)
            return stream


class RecordingHandler:
    """Records handler calls as tuples; thread-safe."""

    def __init__(self, delay: float = 0.0) -> None:
        self.calls: list[tuple] = []
        self._lock = threading.Lock()
        self.delay = delay

    def _rec(self, call: tuple) -> None:
        if self.delay:
            threading.Event().wait(self.delay)
        with self._lock:
            self.calls.append(call)

    @staticmethod
    def _name(o: Any) -> str:
        if hasattr(o, "key") and hasattr(o, "obj"):  # a tombstone
            return f"tombstone:{o.key}"
        return o["metadata"]["name"]

    def on_add(self, o: Any, is_in_initial_list: bool) -> None:
        self._rec(("add", self._name(o), is_in_initial_list))

    def on_update(self, old: Any, new: Any) -> None:
        self._rec(("update", self._name(new), old["metadata"].get("resourceVersion"),
                   new["metadata"].get("resourceVersion")))

    def on_delete(self, o: Any) -> None:
        self._rec(("delete", self._name(o)))

    def snapshot(self) -> list[tuple]:
        with self._lock:
            return list(self.calls)

    def kinds(self) -> list[tuple[str, str]]:
        return [(c[0], c[1]) for c in self.snapshot()]
