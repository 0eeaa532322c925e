"""Hubs as the informer leaves them, for the tests of the event, the subscriber and the hub."""

from __future__ import annotations

from app.cache.hub import EventHub
from informer_core.encoded import EncodedObject


def obj(name, rv, labels=None, ns="n"):
    return EncodedObject.from_dict({"metadata": {"name": name, "namespace": ns, "resourceVersion": str(rv),
                                                 "labels": labels or {}}})


def ready_hub(*objects, ring=100, at=None):
    """A hub after an initial list of ``objects`` at version ``at`` (default: the newest)."""
    hub = EventHub(ring)
    for o in objects:
        hub.apply("add", o, None)
    hub.settle(str(at or max((int(o.resource_version) for o in objects), default=1)))
    hub.mark_ready()
    return hub


def waiting(sub):
    """What waits for ``sub`` in the ring, as its task would take it, left waiting."""
    cursor, pending = sub._cursor, sub._pending
    batch = sub.take()
    sub._cursor, sub._pending = cursor, pending
    return batch


def change(hub, name, rv, old_rv=None, settled=True):
    """An in-order change, as the informer hands it: the view is at ``rv`` after it."""
    kind = "add" if old_rv is None else "update"
    hub.apply(kind, obj(name, rv), obj(name, old_rv) if old_rv else None,
              str(rv) if settled else "")
