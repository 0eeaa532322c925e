"""Each object's copy tagged with its cluster's name, kept while the object is unchanged.

A merged list (``app.http.merged``) gives every item the annotation
``kube-cache-gateway.io/cluster`` on a copy: its metadata decoded, tagged and encoded
again, for every item of every answer. A merged list of 3 × 10,000 Pods took 2.5 times
one cluster's list of 30,000, and allocated six times as much, nearly all of it the
copies. An object's tagged copy is the same until the object changes, so it is kept beside
the object it was made from (the same ``EncodedObject``, by identity: any change in the
cache is a new one) and made again only for what changed since.

Memory: the copies of one resource of one cluster are charged as one item to the
process's query budget (``app.query.budget``); when the budget lets them go, all go, and
are made again as asked. Copies of objects since deleted stay until then. They never hold
more than half the budget: past that, copies are made for the answer and not kept (the
budget keeps the item it is charging whatever its size, and a cluster's copies of 10,000
Pods, kept under a budget already spent, made a merged answer hold 20 MiB).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from app.query.budget import QueryMemory
from informer_core.encoded import EncodedObject

__all__ = ["TaggedCopies"]

_OVERHEAD = 120  # bytes of a kept copy's entry besides the copy itself (tuple, dict slot)


class TaggedCopies:
    """One cluster's tagged copies of one resource's objects; used on the event loop (the
    budget may let them all go from a worker thread)."""

    def __init__(self, memory: QueryMemory) -> None:
        self.memory = memory
        self._kept: dict[str, tuple[EncodedObject, bytes]] = {}
        self._key = ("tagged", id(self))  # the copies' item in the budget
        self.made = 0  # copies made (the rest of those asked for were kept ones)

    def of(self, objects: Iterable[EncodedObject], cluster: str,
           tag: Callable[[bytes, str], bytes]) -> list[bytes]:
        """The copies of ``objects``, in order, each made by ``tag(raw, cluster)`` unless
        kept; a copy made is kept while the copies hold at most half the budget."""
        kept = self._kept
        room = self.memory.room(self._key)
        copies = []
        grown = 0
        for obj in objects:
            found = kept.get(obj.key)
            if found is not None and found[0] is obj:
                copies.append(found[1])
                continue
            copy = tag(obj.raw, cluster)
            self.made += 1
            copies.append(copy)
            freed = len(found[1]) + _OVERHEAD if found else 0
            if grown + len(copy) + _OVERHEAD - freed <= room:
                kept[obj.key] = (obj, copy)
                grown += len(copy) + _OVERHEAD - freed
            elif found is not None:  # its object changed: the old copy is of no more use
                del kept[obj.key]
                grown -= freed
        if grown:
            self.memory.charge(self._key, grown, self._dropped)
        return copies

    def _dropped(self) -> None:
        """The budget let every copy go."""
        self._kept = {}

    def clear(self) -> None:
        """Let every copy go (the cache's end)."""
        self.memory.release(self._key)
        self._dropped()

    def __len__(self) -> int:
        return len(self._kept)
