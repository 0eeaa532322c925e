"""What one request asks for: namespace (or a set of them), label selector, field
selector and dashboard filters.

Lists and streams share it. Label selection reads the parsed labels kept with
each cached object; field terms on ``metadata.name`` and
``metadata.namespace`` read the key; any other field path, and any
``filter``, decodes the object (once per object per event) — the price of
arbitrary paths. Lists test filters on the resource's columns instead
(``app.query.values``: values kept per object version), which ``select`` leaves to
them when asked with ``filtered=False``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from app.query.filters import Filter
from informer_core.encoded import EncodedObject
from informer_core.fields import FieldSelector
from informer_core.fields import everything as no_fields
from informer_core.labels import Selector
from informer_core.labels import everything as no_labels
from informer_core.lister import POSITIVE, select_encoded
from informer_core.store import LABEL_INDEX, NAMESPACE_INDEX, Indexer, object_key

__all__ = ["Selection"]

_FAST_FIELDS = ("metadata.name", "metadata.namespace")

_GROUPS: dict[tuple, int] = {}  # see Selection.group
_GROUPS_KEPT = 4096
_NUMBERS = itertools.count(1)


class Selection:
    """A namespace (or all), a label selector and a field selector; immutable.

    ``namespaces`` narrows a selection of all namespaces to a set of them (a
    caller's partition, with ``--namespace-partitioned-lists``).
    """

    __slots__ = ("namespace", "namespaces", "labels", "fields", "filters", "_fast_terms", "_slow",
                 "_group", "namespace_only")

    def __init__(self, namespace: str | None = None, labels: Selector | None = None,
                 fields: FieldSelector | None = None,
                 namespaces: frozenset[str] | None = None,
                 filters: tuple[Filter, ...] = ()) -> None:
        self.namespace = namespace or None
        self.namespaces = namespaces if self.namespace is None else None
        self.labels = labels or no_labels()
        self.fields = fields or no_fields()
        self._fast_terms = [t for t in self.fields.terms if t.field in _FAST_FIELDS]
        slow = [t for t in self.fields.terms if t.field not in _FAST_FIELDS]
        self._slow = FieldSelector(tuple(slow)) if slow else None
        self.filters = filters
        self._group: int | None = None
        # nothing filtered out beyond the namespace, said once: every change's dispatch
        # asks it of each selection
        self.namespace_only = (self.labels.empty() and self.fields.empty()
                               and self.namespaces is None and not filters)

    @property
    def group(self) -> int:
        """A number that equal selections share: streams with equal selections filter each
        event once between them (``EventHub``'s dispatch). Numbers are never reused, so a
        forgotten one costs only the sharing, never a wrong answer."""
        found = self._group
        if found is None:
            key = (self.namespace, self.namespaces, self.labels, self.fields,
                   tuple(f.text for f in self.filters))
            found = _GROUPS.get(key)
            if found is None:
                if len(_GROUPS) >= _GROUPS_KEPT:  # hostile variety must not grow memory
                    _GROUPS.clear()
                found = _GROUPS[key] = next(_NUMBERS)
            self._group = found
        return found

    def matches(self, obj: EncodedObject, decoded: Callable[[], dict[str, Any]] | None = None) -> bool:
        """Return whether ``obj`` is selected; ``decoded()`` supplies its dict if needed."""
        if self.namespace is not None and obj.namespace != self.namespace:
            return False
        if self.namespaces is not None and obj.namespace not in self.namespaces:
            return False
        if not self.labels.matches(obj.labels):
            return False
        for term in self._fast_terms:
            value = obj.name if term.field == "metadata.name" else obj.namespace
            if (value == term.value) == term.negated:
                return False
        if self._slow is None and not self.filters:
            return True
        whole = decoded() if decoded is not None else obj.to_dict()
        if self._slow is not None and not self._slow.matches(whole):
            return False
        return all(f.matches(whole) for f in self.filters)

    def select(self, indexer: Indexer, ordered: bool = False,
               filtered: bool = True) -> list[EncodedObject]:
        """Return the matching cached objects (in key order if ``ordered``); with
        ``filtered=False`` the dashboard filters are left to the caller."""
        namespace = self.namespace
        if namespace is None:
            hinted = self.fields.requires_exact("metadata.namespace")
            namespace = hinted if hinted is not None else None
        name = self.fields.requires_exact("metadata.name")
        if name is not None and namespace is not None:
            found = indexer.get_encoded_by_key(object_key(namespace, name))
            candidates = [found] if found is not None else []
            if found is not None and not self.labels.matches(found.labels):
                candidates = []
        elif namespace is None and self.namespaces is not None:
            candidates = [o for ns in self.namespaces
                          for o in select_encoded(indexer, self.labels, ns, False)]
            if ordered:
                candidates.sort(key=lambda o: o.key)
        else:
            candidates = select_encoded(indexer, self.labels, namespace, ordered)
        if namespace is not None and self.namespaces is not None and namespace not in self.namespaces:
            candidates = []
        if self.fields.empty() and (not filtered or not self.filters):
            return candidates
        if not filtered and self.filters:
            unfiltered = self.unfiltered()
            return [o for o in candidates if unfiltered.matches(o)]
        return [o for o in candidates if self.matches(o)]

    def read_from(self, indexer: Indexer) -> tuple[str | None, tuple[str, ...]]:
        """The fewest index buckets every object this selection matches lies in, as (index,
        values); (``None``, ()) for the whole store. While nothing under them is written,
        the selection's answer stays the same (``ThreadSafeStore.unchanged_since``):
        each positive label requirement and the namespace (or the caller's namespaces)
        bound the answer, and the smallest of them is taken."""
        store = indexer.thread_safe_store
        namespace = self.namespace or self.fields.requires_exact("metadata.namespace")
        options: list[tuple[str, tuple[str, ...]]] = []
        if namespace is not None:
            options.append((NAMESPACE_INDEX, (namespace,)))
        elif self.namespaces is not None:
            options.append((NAMESPACE_INDEX, tuple(sorted(self.namespaces))))
        if store.has_index(LABEL_INDEX):
            options += [(LABEL_INDEX, tuple(f"{r.key}={v}" for v in r.values))
                        for r in self.labels.requirements if r.operator in POSITIVE]
        if not options:
            return None, ()
        return min(options, key=lambda o: sum(store.bucket_size(o[0], v) for v in o[1]))

    @property
    def partition(self) -> str:
        """The caller's namespaces as text (``--namespace-partitioned-lists``), "" for none:
        part of what identifies an answer."""
        return ",".join(sorted(self.namespaces)) if self.namespaces is not None else ""

    def unfiltered(self) -> Selection:
        """The same selection without its dashboard filters."""
        return Selection(self.namespace, self.labels, self.fields, self.namespaces)
