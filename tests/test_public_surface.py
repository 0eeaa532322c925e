"""The public surface, pinned: each package's ``__all__``, and no import reaching past one.

A name a module does not list in ``__all__`` is private to it; production code
that imports such a name couples itself to an internal detail. Tests may.
"""

from __future__ import annotations

import ast
import importlib
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("informer_core", "app", "control_plane")


def production_modules() -> list[pathlib.Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_production_module_declares_its_public_names():
    missing = [module_name(p) for p in production_modules()
               if "__all__" not in vars(importlib.import_module(module_name(p)))]
    assert not missing


def test_no_production_import_reaches_past_a_modules_public_names():
    reaching = []
    for path in production_modules():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            if node.module.split(".")[0] not in PACKAGES:
                continue
            target = importlib.import_module(node.module)
            public = set(getattr(target, "__all__", ()))
            for alias in node.names:
                if alias.name not in public and not hasattr(
                        importlib.import_module(node.module), "__path__"):
                    reaching.append(f"{module_name(path)}: from {node.module} import {alias.name}")
    assert not reaching, "\n".join(reaching)


@pytest.mark.parametrize("package,names", [
    ("informer_core", [
        "NAMESPACE_INDEX", "APIResource", "APIStatusError", "ApiListerWatcher", "Delta",
        "DeletedFinalStateUnknown", "DeltaFIFO", "DeltaType", "Discovery", "FIFOClosedError",
        "FieldSelector", "GenericInformer", "GenericLister", "GenericNamespaceLister",
        "GroupVersionResource", "Indexer", "InformerError", "ListOptions", "ListPage",
        "ListerWatcher", "NotFoundError", "Reflector", "ResourceEventHandler",
        "ResourceEventHandlerFuncs", "ResourceExpiredError", "Selector", "SelectorError",
        "SharedIndexInformer", "SharedInformerFactory", "UnsupportedResourceError",
        "WatchAbortedError", "WatchEvent", "WatchStream", "deletion_handling_meta_namespace_key",
        "everything", "meta_namespace_index_func", "meta_namespace_key", "parse_field_selector",
        "parse_selector", "selector_from_set", "split_meta_namespace_key",
    ]),
    ("control_plane", ["APIServer", "ClusterUnavailableError", "FakeCluster", "KubeAPI",
                       "LocalCluster", "User", "free_port", "widget_crd"]),
    ("app", ["create_app"]),
])
def test_package_exports_exactly(package, names):
    module = importlib.import_module(package)
    assert sorted(module.__all__) == sorted(names)
    for name in names:
        assert hasattr(module, name), name


@pytest.mark.parametrize("module,names", [
    # the house's rooms: what ties the wings together, the cluster unit, the request's context
    ("app.gateway", ["Connector", "Gateway"]),
    ("app.clusters.cluster", ["Cluster", "DEFAULT_CLUSTER", "build_factory",
                              "strip_managed_fields"]),
    ("app.clusters.config", ["LOCAL_RBAC_MODES", "ClusterSpec", "ClustersError", "check_name",
                             "default_of", "parse_clusters", "read_clusters_file"]),
    ("app.clusters.connect", ["Connector", "RefusedSecret", "api_client_of", "connect", "kubeconfig_of_secret",
                              "load_default_client", "own_namespace", "refuse_untrusted",
                              "why_not_connected"]),
    ("app.clusters.sources", ["ClusterSet", "ClustersFile", "Said", "ServedClusters"]),
    # the request's notes and what it asks to do, below the wings that write and read them
    ("app.kube.context", ["RequestContext", "context_of"]),
    ("app.kube.access", ["Access", "Attributes", "narrowed_to"]),
    # the hub's three rooms; the hub still names the other two's
    ("app.cache.event", ["Event", "RecentCopies", "frames", "parse_rv"]),
    ("app.cache.subscriber", ["SubscribedHub", "Subscriber"]),
    ("app.cache.hub", ["Event", "EventHub", "RecentCopies", "Subscriber", "frames", "parse_rv"]),
    # authentication apart from authorization
    ("app.auth.authentication", ["Authenticator", "Identity", "NoIdentityCluster",
                                 "TokenReviewAuthenticator", "certified", "token_expiry",
                                 "unauthorized"]),
    ("app.auth.access_review", ["AccessReviews", "Attributes", "forbidden_message"]),
    ("app.auth.authorization", ["Access", "Authorization", "Grant", "attributes", "credentials_of"]),
    ("app.auth.policy", ["ResourcePolicy"]),
    ("app.cache.resources", ["ClusterCache", "ResourceCache"]),
    ("app.cache.query_engine", ["QueryEngine", "Result"]),
    ("app.query.values", ["PathValues", "ValueCache"]),
    ("app.launch.cli", ["build_parser", "main"]),
    ("app.launch.launch", ["serve"]),
    ("app.settings", ["Settings", "add_arguments", "is_loopback", "settings_from_args"]),
    # capabilities named by protocols
    ("informer_core.listwatch", ["Abortable", "ListOptions", "ListPage", "ListerWatcher",
                                 "WatchEvent", "WatchStream", "status_error", "tweaked"]),
    ("informer_core.informer", ["EncodedHandler", "HandlerRegistration", "ResourceEventHandler",
                                "InlineHandler", "ResourceEventHandlerFuncs", "SettledHandler",
                                "SharedIndexInformer", "SyncedHandler"]),
    ("informer_core.stop", ["StopEvent", "when_set"]),
])
def test_module_exports_exactly(module, names):
    assert sorted(importlib.import_module(module).__all__) == sorted(names)


def test_each_wing_of_app_is_a_package_exporting_nothing():
    for wing in ("auth", "cache", "clusters", "http", "kube", "process", "query", "streams"):
        package = importlib.import_module(f"app.{wing}")
        assert package.__all__ == [] and package.__doc__, wing


def test_every_library_error_is_at_the_package_root():
    import informer_core
    from informer_core import errors

    for name in errors.__all__:
        assert getattr(informer_core, name) is getattr(errors, name), name
