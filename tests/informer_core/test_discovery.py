"""Discovery resolves resources as kubectl writes them, refreshes on a miss, confirms removals."""

from __future__ import annotations

import pytest

from informer_core.discovery import Discovery, GroupVersionResource
from informer_core.errors import NotFoundError, UnsupportedResourceError

RW = ["get", "list", "watch", "create", "delete"]


def documents(extra_groups=()):
    docs = {
        "/api": {"kind": "APIVersions", "versions": ["v1"]},
        "/version": {"gitVersion": "v1.20.2"},
        "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
            {"name": "pods", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": RW,
             "shortNames": ["po"], "categories": ["all"]},
            {"name": "pods/log", "namespaced": True, "kind": "Pod", "verbs": ["get"]},
            {"name": "bindings", "namespaced": True, "kind": "Binding", "verbs": ["create"]},
            {"name": "nodes", "namespaced": False, "kind": "Node", "verbs": RW, "shortNames": ["no"]},
            {"name": "events", "namespaced": True, "kind": "Event", "verbs": RW, "shortNames": ["ev"]},
        ]},
        "/apis/apps/v1": {"kind": "APIResourceList", "groupVersion": "apps/v1", "resources": [
            {"name": "deployments", "namespaced": True, "kind": "Deployment", "verbs": RW,
             "shortNames": ["deploy"]}]},
        "/apis/events.k8s.io/v1": {"kind": "APIResourceList", "groupVersion": "events.k8s.io/v1",
                                   "resources": [{"name": "events", "namespaced": True,
                                                  "kind": "Event", "verbs": RW, "shortNames": ["ev"]}]},
        "/apis/apiextensions.k8s.io/v1": {"kind": "APIResourceList", "resources": []},
    }
    groups = [
        {"name": "apps", "versions": [{"version": "v1"}], "preferredVersion": {"version": "v1"}},
        {"name": "events.k8s.io", "versions": [{"version": "v1"}],
         "preferredVersion": {"version": "v1"}},
        {"name": "apiextensions.k8s.io", "versions": [{"version": "v1"}],
         "preferredVersion": {"version": "v1"}},
    ]
    for group, doc in extra_groups:
        groups.append({"name": group, "versions": [{"version": "v1"}],
                       "preferredVersion": {"version": "v1"}})
        docs[f"/apis/{group}/v1"] = doc
    docs["/apis"] = {"kind": "APIGroupList", "groups": groups}
    return docs


class Server:
    def __init__(self, docs):
        self.docs = docs
        self.fetches: list[str] = []

    def fetch(self, path):
        self.fetches.append(path)
        if path in self.docs:
            return 200, self.docs[path]
        return 404, {"kind": "Status", "code": 404}


@pytest.mark.parametrize("text,expected", [
    ("pods", ("", "v1", "pods")), ("po", ("", "v1", "pods")), ("pod", ("", "v1", "pods")),
    ("Pod", ("", "v1", "pods")), ("nodes", ("", "v1", "nodes")),
    ("deployments", ("apps", "v1", "deployments")), ("deploy", ("apps", "v1", "deployments")),
    ("deployments.apps", ("apps", "v1", "deployments")),
    ("deployments.v1.apps", ("apps", "v1", "deployments")),
    ("events", ("", "v1", "events")),  # the legacy group wins, as kubectl
    ("events.events.k8s.io", ("events.k8s.io", "v1", "events")),
    ("events.v1.events.k8s.io", ("events.k8s.io", "v1", "events")),
])
def test_resolve_text(text, expected):
    resource = Discovery(fetch=Server(documents()).fetch).resolve_text(text)
    assert resource.gvr == GroupVersionResource(*expected)


def test_resolved_resource_carries_kind_scope_and_paths():
    d = Discovery(fetch=Server(documents()).fetch)
    pods = d.resolve(("", "v1", "pods"))
    assert (pods.kind, pods.list_kind, pods.namespaced, pods.api_version) == ("Pod", "PodList", True, "v1")
    assert pods.path == "/api/v1/pods"
    deploy = d.resolve(GroupVersionResource("apps", "v1", "deployments"))
    assert deploy.path == "/apis/apps/v1/deployments" and deploy.api_version == "apps/v1"
    assert d.resolve(("", "v1", "nodes")).namespaced is False


def test_unknown_and_unwatchable_resources_are_rejected_clearly():
    d = Discovery(fetch=Server(documents()).fetch, min_refresh_interval=0)
    with pytest.raises(NotFoundError, match="widgets"):
        d.resolve(("", "v1", "widgets"))
    with pytest.raises(NotFoundError):
        d.resolve_text("nosuchthing")
    with pytest.raises(UnsupportedResourceError, match="cannot be listed and watched"):
        d.resolve(("", "v1", "bindings"))
    with pytest.raises(NotFoundError):
        d.resolve(("", "v1", "pods/log"))


def test_a_miss_refreshes_so_new_crds_resolve():
    server = Server(documents())
    now = [0.0]
    d = Discovery(fetch=server.fetch, min_refresh_interval=1.0, clock=lambda: now[0])
    d.resolve(("", "v1", "pods"))
    server.docs = documents([("example.com", {"resources": [
        {"name": "widgets", "namespaced": True, "kind": "Widget", "verbs": RW}]})])
    now[0] = 5.0
    assert d.resolve(("example.com", "v1", "widgets")).kind == "Widget"


def test_concurrent_misses_share_a_refresh_and_refreshes_are_spaced():
    server = Server(documents())
    now = [100.0]
    slept: list[float] = []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    d = Discovery(fetch=server.fetch, min_refresh_interval=1.0, clock=lambda: now[0], sleep=sleep)
    d.refresh()
    before = server.fetches.count("/api")
    # A miss asked before the last refresh started is answered from it: no new fetch.
    d._last_refresh = 100.0
    now[0] = 100.0
    asked = now[0] - 0.5
    d._refresh_since(asked)
    assert server.fetches.count("/api") == before
    # A miss asked after it waits out the interval, then refreshes once.
    now[0] = 100.2
    with pytest.raises(NotFoundError):
        d.resolve(("", "v1", "widgets"))
    assert server.fetches.count("/api") == before + 1
    assert slept == [pytest.approx(0.8)]


def test_resource_gone_needs_positive_confirmation():
    crd_group = ("example.com", {"resources": [
        {"name": "widgets", "namespaced": True, "kind": "Widget", "verbs": RW}]})
    server = Server(documents([crd_group]))
    d = Discovery(fetch=server.fetch)
    gvr = GroupVersionResource("example.com", "v1", "widgets")
    assert d.resource_gone(gvr) is False  # still served
    # After an API server restart: discovery lacks the group but the CRD object exists.
    server.docs = documents()
    server.docs["/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com"] = {}
    assert d.resource_gone(gvr) is False
    del server.docs["/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com"]
    assert d.resource_gone(gvr) is True
    server.docs = {}  # discovery itself failing confirms nothing
    assert d.resource_gone(gvr) is False
