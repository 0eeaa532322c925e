"""informer_core: a Python port of client-go's ``tools/cache`` informer machinery.

Threads, not goroutines. The public API is exactly ``__all__``; see the
project's API contract for each name's behaviour.
"""

from informer_core.delta_fifo import Delta, DeletedFinalStateUnknown, DeltaFIFO, DeltaType
from informer_core.discovery import APIResource, Discovery
from informer_core.errors import (
    APIStatusError,
    FIFOClosedError,
    InformerError,
    NotFoundError,
    ResourceExpiredError,
    SelectorError,
    UnsupportedResourceError,
    WatchAbortedError,
)
from informer_core.factory import GenericInformer, GroupVersionResource, SharedInformerFactory
from informer_core.fields import FieldSelector, parse_field_selector
from informer_core.informer import (
    ResourceEventHandler,
    ResourceEventHandlerFuncs,
    SharedIndexInformer,
)
from informer_core.labels import Selector, everything, parse_selector, selector_from_set
from informer_core.lister import GenericLister, GenericNamespaceLister
from informer_core.listwatch import ListerWatcher, ListOptions, ListPage, WatchEvent, WatchStream
from informer_core.reflector import Reflector
from informer_core.rest import ApiListerWatcher
from informer_core.store import (
    NAMESPACE_INDEX,
    Indexer,
    deletion_handling_meta_namespace_key,
    meta_namespace_index_func,
    meta_namespace_key,
    split_meta_namespace_key,
)

__all__ = [
    "NAMESPACE_INDEX",
    "APIResource",
    "APIStatusError",
    "ApiListerWatcher",
    "Discovery",
    "GenericInformer",
    "GenericLister",
    "GenericNamespaceLister",
    "GroupVersionResource",
    "ListOptions",
    "ListPage",
    "ListerWatcher",
    "Reflector",
    "ResourceEventHandler",
    "ResourceEventHandlerFuncs",
    "SharedIndexInformer",
    "SharedInformerFactory",
    "WatchEvent",
    "WatchStream",
    "Delta",
    "DeletedFinalStateUnknown",
    "DeltaFIFO",
    "DeltaType",
    "FIFOClosedError",
    "FieldSelector",
    "Indexer",
    "InformerError",
    "NotFoundError",
    "ResourceExpiredError",
    "Selector",
    "SelectorError",
    "UnsupportedResourceError",
    "WatchAbortedError",
    "deletion_handling_meta_namespace_key",
    "everything",
    "meta_namespace_index_func",
    "meta_namespace_key",
    "parse_field_selector",
    "parse_selector",
    "selector_from_set",
    "split_meta_namespace_key",
]
