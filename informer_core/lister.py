"""Listers: read an informer's indexer by namespace and label selector.

Selection costs in proportion to the answer, not to the cache: the namespace
index narrows to one namespace, and for a selector with ``=``/``==``/``in``
requirements the label index yields the candidates of the most selective one;
only those candidates are matched against the whole selector. An empty
selector over all namespaces takes every object without matching anything.
"""

from __future__ import annotations

from typing import Any

from informer_core.encoded import EncodedObject
from informer_core.errors import NotFoundError
from informer_core.labels import Operator, Selector, everything
from informer_core.store import LABEL_INDEX, NAMESPACE_INDEX, Indexer, object_key

__all__ = ["POSITIVE", "GenericLister", "GenericNamespaceLister", "NotFoundError",
           "select_encoded"]

# The operators a label index can answer: each names the values an object must have.
POSITIVE = (Operator.IN, Operator.EQUALS, Operator.DOUBLE_EQUALS)


def select_encoded(indexer: Indexer, selector: Selector | None = None,
                   namespace: str | None = None, ordered: bool = False) -> list[EncodedObject]:
    """Return the stored objects in ``namespace`` (all if ``None``) matching ``selector``.

    With ``ordered``, in key order (the API server's list order): the
    candidate keys are sorted as plain strings, or the store's kept order is
    used, which is cheaper than sorting the objects afterwards.
    """
    store = indexer.thread_safe_store
    selector = selector or everything()
    candidates: set[str] | None = None
    if namespace is not None:
        candidates = set(store.index_keys(NAMESPACE_INDEX, namespace))
        if not candidates:
            return []
    positive = [r for r in selector.requirements if r.operator in POSITIVE]
    requirements = selector.requirements
    if positive and store.has_index(LABEL_INDEX):
        def cost(requirement: Any) -> int:
            return sum(store.bucket_size(LABEL_INDEX, f"{requirement.key}={v}")
                       for v in requirement.values)

        best = min(positive, key=cost)
        # Read under the store's lock with the index: every object has ``best``.
        objects = store.by_index_values(LABEL_INDEX, [f"{best.key}={v}" for v in best.values],
                                        within=candidates, ordered=ordered)
        requirements = tuple(r for r in requirements if r is not best)
    elif candidates is None:
        objects = store.list_sorted() if ordered else store.list()
    else:
        objects = store.get_many(sorted(candidates) if ordered else candidates)
    for requirement in requirements:  # one pass per requirement: each a tight comprehension
        test = requirement.test
        objects = [o for o in objects if test(o.labels)]
    return objects


class GenericNamespaceLister:
    """Reads one namespace of a namespaced resource."""

    def __init__(self, indexer: Indexer, namespace: str) -> None:
        self._indexer = indexer
        self._namespace = namespace

    def list(self, selector: Selector | None = None) -> list[dict]:
        """Return this namespace's objects matching ``selector``."""
        return [o.to_dict() for o in select_encoded(self._indexer, selector, self._namespace)]

    def get(self, name: str) -> dict:
        """Return the object called ``name``.

        Raises:
            NotFoundError: there is none.
        """
        found = self._indexer.get_encoded_by_key(object_key(self._namespace, name))
        if found is None:
            raise NotFoundError(f'"{name}" not found in namespace "{self._namespace}"')
        return found.to_dict()


class GenericLister:
    """Reads every namespace (or a cluster-scoped resource)."""

    def __init__(self, indexer: Indexer, resource: str = "") -> None:
        self._indexer = indexer
        self._resource = resource

    def list(self, selector: Selector | None = None) -> list[dict]:
        """Return every object matching ``selector``."""
        return [o.to_dict() for o in select_encoded(self._indexer, selector)]

    def get(self, key: str) -> dict:
        """Return the object under a store key (``"ns/name"``, or ``"name"`` if cluster-scoped).

        Raises:
            NotFoundError: there is none.
        """
        found = self._indexer.get_encoded_by_key(key)
        if found is None:
            what = f"{self._resource} " if self._resource else ""
            raise NotFoundError(f'{what}"{key}" not found')
        return found.to_dict()

    def by_namespace(self, namespace: str) -> GenericNamespaceLister:
        """Return a lister restricted to ``namespace``."""
        return GenericNamespaceLister(self._indexer, namespace)
