"""Key functions, the namespace and label indexes, and the ``Indexer`` facade.

``Indexer`` is client-go's ``cache.Indexer``: a thread-safe map from keys to
objects with named secondary indexes. It has no lock of its own; the
``ThreadSafeStore`` beneath it does. Objects are kept encoded (see
``informer_core.encoded``): the dict methods decode on access and hand out
equal, fresh dicts; the ``*_encoded`` methods give the stored form to callers
that serve bytes (the HTTP gateway) or want no decoding cost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from informer_core.encoded import EncodedObject, encode, object_key
from informer_core.thread_safe_store import IndexFunc, ThreadSafeStore, accepts_encoded
from informer_core.tombstone import DeletedFinalStateUnknown

__all__ = [
    "EncodedView",
    "Indexer",
    "IndexFunc",
    "KeyFunc",
    "LABEL_INDEX",
    "NAMESPACE_INDEX",
    "deletion_handling_meta_namespace_key",
    "label_index_func",
    "meta_namespace_index_func",
    "meta_namespace_key",
    "object_key",
    "split_meta_namespace_key",
]

KeyFunc = Callable[[Any], str]

NAMESPACE_INDEX = "namespace"
LABEL_INDEX = "labels"  # values are "key=value"; answers = and in selectors by lookup


def meta_namespace_key(obj: Any) -> str:
    """Return ``"namespace/name"``, or ``"name"`` for a cluster-scoped object.

    A ``str`` is taken to be a key already (client-go's ``ExplicitKey``).

    Raises:
        ValueError: the object has no ``metadata``.
    """
    if isinstance(obj, EncodedObject):
        return obj.key
    if isinstance(obj, str):
        return obj
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        raise ValueError(f"object has no meta: {type(obj).__name__} without 'metadata'")
    return object_key(meta.get("namespace"), meta.get("name") or "")


def split_meta_namespace_key(key: str) -> tuple[str, str]:
    """Return (namespace, name) of a key made by ``meta_namespace_key``.

    Raises:
        ValueError: the key has more than one ``/``.
    """
    parts = key.split("/")
    if len(parts) == 1:
        return "", parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise ValueError(f"unexpected key format: {key!r}")


def deletion_handling_meta_namespace_key(obj: Any) -> str:
    """Like ``meta_namespace_key``, but also accept a ``DeletedFinalStateUnknown``."""
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    return meta_namespace_key(obj)


@accepts_encoded
def meta_namespace_index_func(obj: Any) -> list[str]:
    """Index by namespace (cluster-scoped objects under ``""``, as client-go)."""
    if isinstance(obj, EncodedObject):
        return [obj.namespace]
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        raise ValueError("object has no meta")
    return [meta.get("namespace") or ""]


@accepts_encoded
def label_index_func(obj: Any) -> list[str]:
    """Index by each ``key=value`` label pair."""
    if isinstance(obj, EncodedObject):
        labels = obj.labels
    else:
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        labels = (meta or {}).get("labels") or {}
    return [f"{k}={v}" for k, v in labels.items()]


class Indexer:
    """client-go's ``Indexer``: thread-safe keyed storage with named indexes.

    The namespace index (``NAMESPACE_INDEX``) is always present. Objects handed
    out are equal to what was stored, decoded afresh; treat them as read-only.
    """

    def __init__(self, key_func: KeyFunc = meta_namespace_key,
                 indexers: Mapping[str, IndexFunc] | None = None) -> None:
        all_indexers: dict[str, IndexFunc] = {NAMESPACE_INDEX: meta_namespace_index_func}
        all_indexers.update(indexers or {})
        self._key_func = key_func
        self._store = ThreadSafeStore(all_indexers)

    # -- writes ---------------------------------------------------------------

    def _key_of(self, obj: Any) -> str:
        if isinstance(obj, EncodedObject) and self._key_func is meta_namespace_key:
            return obj.key
        return self._key_func(obj if not isinstance(obj, EncodedObject) else obj.to_dict())

    def add(self, obj: Any) -> None:
        """Insert ``obj`` (or replace the object with its key)."""
        encoded = encode(obj)
        self._store.add(self._key_of(encoded), encoded)

    def update(self, obj: Any) -> None:
        """Replace the object with ``obj``'s key (or insert it)."""
        encoded = encode(obj)
        self._store.update(self._key_of(encoded), encoded)

    def delete(self, obj: Any) -> None:
        """Remove the object with ``obj``'s key; a missing key is not an error."""
        if isinstance(obj, DeletedFinalStateUnknown):
            self._store.delete(obj.key)
        else:
            self._store.delete(self._key_of(obj))

    def replace(self, objs: Iterable[Any], resource_version: str = "") -> None:
        """Replace the whole content with ``objs`` (``resource_version`` is unused here)."""
        items: dict[str, EncodedObject] = {}
        for obj in objs:
            encoded = encode(obj)
            items[self._key_of(encoded)] = encoded
        self._store.replace(items)

    def resync(self) -> None:
        """Do nothing: an indexer has nothing to resync (as client-go)."""

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add index functions; existing objects are indexed at once.

        Raises:
            ValueError: an index name is already in use.
        """
        self._store.add_indexers(indexers)

    # -- reads (dicts) --------------------------------------------------------

    def get(self, obj: Any) -> dict | None:
        """Return the stored object with ``obj``'s key, or ``None``."""
        return self.get_by_key(self._key_of(obj))

    def get_by_key(self, key: str) -> dict | None:
        """Return the stored object under ``key``, or ``None``."""
        found = self._store.get(key)
        return found.to_dict() if found is not None else None

    def list(self) -> list[dict]:
        """Return every stored object."""
        return [o.to_dict() for o in self._store.list()]

    def list_keys(self) -> list[str]:
        """Return every key."""
        return self._store.list_keys()

    def by_index(self, index_name: str, value: str) -> list[dict]:
        """Return the objects whose ``index_name`` value is ``value``.

        Raises:
            KeyError: no such index.
        """
        return [o.to_dict() for o in self._store.by_index(index_name, value)]

    def index_keys(self, index_name: str, value: str) -> list[str]:
        """Return the keys whose ``index_name`` value is ``value``.

        Raises:
            KeyError: no such index.
        """
        return self._store.index_keys(index_name, value)

    def list_index_func_values(self, index_name: str) -> list[str]:
        """Return the values ``index_name`` holds now ([] for an unknown index)."""
        return self._store.list_index_func_values(index_name)

    def get_indexers(self) -> dict[str, IndexFunc]:
        """Return a copy of the index functions."""
        return self._store.get_indexers()

    # -- reads (encoded, no decoding) -----------------------------------------

    def get_encoded_by_key(self, key: str) -> EncodedObject | None:
        """Return the stored form under ``key``, or ``None``."""
        return self._store.get(key)

    def list_encoded(self) -> list[EncodedObject]:
        """Return every object in stored form."""
        return self._store.list()

    def by_index_encoded(self, index_name: str, value: str) -> list[EncodedObject]:
        """Return objects in stored form by index value.

        Raises:
            KeyError: no such index.
        """
        return self._store.by_index(index_name, value)

    @property
    def thread_safe_store(self) -> ThreadSafeStore:
        """The store beneath (for listers that select by several indexes at once)."""
        return self._store

    def __len__(self) -> int:
        return len(self._store)


class EncodedView:
    """An ``Indexer`` seen as a ``KeyListerGetter`` that hands out stored forms.

    The informer gives this to its ``DeltaFIFO`` so that tombstones made on a
    relist carry the stored object without decoding it.
    """

    def __init__(self, indexer: Indexer) -> None:
        self._indexer = indexer

    def list_keys(self) -> list[str]:
        return self._indexer.list_keys()

    def get_by_key(self, key: str) -> EncodedObject | None:
        return self._indexer.get_encoded_by_key(key)
