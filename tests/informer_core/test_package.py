"""The package root exports exactly the public API, and every error is where the library says (each error importable from the module that raises it and from the root)."""

from __future__ import annotations

import importlib

import pytest

import informer_core
from informer_core import errors


def test_all_names_exist_and_are_unique():
    assert len(informer_core.__all__) == len(set(informer_core.__all__))
    for name in informer_core.__all__:
        assert hasattr(informer_core, name), name


@pytest.mark.parametrize("module,names", [
    ("informer_core.labels", ["parse_selector", "Selector", "everything", "selector_from_set",
                              "SelectorError"]),
    ("informer_core.fields", ["parse_field_selector", "FieldSelector", "SelectorError"]),
    ("informer_core.store", ["meta_namespace_key", "split_meta_namespace_key",
                             "deletion_handling_meta_namespace_key", "NAMESPACE_INDEX",
                             "meta_namespace_index_func", "Indexer"]),
    ("informer_core.delta_fifo", ["DeltaType", "Delta", "DeletedFinalStateUnknown", "DeltaFIFO",
                                  "FIFOClosedError"]),
])
def test_contract_names_are_importable_from_their_modules(module, names):
    mod = importlib.import_module(module)
    for name in names:
        assert hasattr(mod, name), f"{module}.{name}"


@pytest.mark.parametrize("module,names", [
    ("informer_core.labels", ["SelectorError"]),
    ("informer_core.fields", ["SelectorError"]),
    ("informer_core.delta_fifo", ["FIFOClosedError"]),
    ("informer_core.reflector", ["ResourceExpiredError", "ListerWatcher", "ListOptions", "ListPage",
                                 "WatchEvent", "WatchStream", "Reflector"]),
    ("informer_core.informer", ["SharedIndexInformer", "ResourceEventHandler",
                                "ResourceEventHandlerFuncs"]),
    ("informer_core.factory", ["NotFoundError", "UnsupportedResourceError", "GroupVersionResource",
                               "SharedInformerFactory", "GenericInformer"]),
    ("informer_core.lister", ["NotFoundError", "GenericLister", "GenericNamespaceLister"]),
])
def test_each_module_exports_what_it_raises_and_defines(module, names):
    mod = importlib.import_module(module)
    for name in names:
        assert hasattr(mod, name), f"{module}.{name}"
        if name.endswith("Error"):
            assert getattr(mod, name) is getattr(errors, name)


def test_errors_live_in_errors_and_at_the_root():
    for name in ("SelectorError", "FIFOClosedError", "ResourceExpiredError", "NotFoundError",
                 "UnsupportedResourceError"):
        assert getattr(informer_core, name) is getattr(errors, name)
    assert issubclass(errors.SelectorError, ValueError)
    assert issubclass(errors.NotFoundError, LookupError)


def test_delta_type_values_are_client_go_strings():
    from informer_core import DeltaType

    assert [t.value for t in DeltaType] == ["Added", "Updated", "Deleted", "Replaced", "Sync"]
    assert DeltaType.ADDED == "Added"
