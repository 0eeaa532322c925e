"""LocalRBAC over an in-memory cluster: it follows RBAC, decides only when it may, and says why.

The API server's own answers are held against the same code in ``test_local_rbac_live.py``;
here the faults: a detection that says a webhook is there, watches that stay closed, a
gateway refused the right to list RBAC.
"""

from __future__ import annotations

import asyncio
import functools
import logging

import pytest

from app.clusters import local_rbac
from app.clusters.local_rbac import LocalRBAC
from app.kube.access import Attributes
from app.clusters.cluster import build_factory
from app.settings import Settings
from control_plane.fake import BUILTIN_RESOURCES, RBAC_RESOURCES, FakeCluster
from informer_core.listwatch import status_error

RBAC_PATH = "/apis/rbac.authorization.k8s.io/v1"
READ_PODS = Attributes("list", "pods", "", "v1", "shop")


def fake_with_rbac() -> FakeCluster:
    fake = FakeCluster(BUILTIN_RESOURCES + RBAC_RESOURCES)
    fake.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": "shop"}})
    fake.create(f"{RBAC_PATH}/clusterroles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "read-pods"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]})
    bind(fake, "ann")
    return fake


def bind(fake: FakeCluster, user: str) -> str:
    path = f"{RBAC_PATH}/namespaces/shop/rolebindings"
    fake.create(path, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": f"{user}-reads", "namespace": "shop"},
        "subjects": [{"kind": "User", "name": user}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "read-pods"}})
    return f"{path}/{user}-reads"


def following(fake: FakeCluster, mode: str = "true", rules=None, lister_watcher=None,
              changes: list | None = None, stale_after: float = 5.0) -> LocalRBAC:
    factory = build_factory(Settings(), discovery=fake.discovery(),
                            lister_watcher_func=lister_watcher or fake.lister_watcher)
    on_change = (lambda: changes.append(1)) if changes is not None else None
    return LocalRBAC("test", lambda: factory.sibling(), mode, rules, on_change, stale_after)


def on_a_loop(test):
    """Run an ``async def`` test on a loop of its own (pytest runs the plain function)."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))
    return run


async def until(condition, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.02)


@on_a_loop
async def test_it_decides_once_synced_and_follows_each_change():
    fake = fake_with_rbac()
    changes: list = []
    rbac = following(fake, changes=changes)
    assert not rbac.rbac.deciding  # nothing decides before the index is built
    await rbac.start()
    try:
        await until(lambda: rbac.rbac.deciding)
        assert rbac.state == "deciding" and rbac.settled
        assert rbac.rbac.allows("ann", (), READ_PODS) is not None
        assert rbac.rbac.allows("bob", (), READ_PODS) is None
        seen = len(changes)
        path = bind(fake, "bob")
        await until(lambda: rbac.rbac.allows("bob", (), READ_PODS) is not None)
        fake.delete(path)
        await until(lambda: rbac.rbac.allows("bob", (), READ_PODS) is None)
        assert len(changes) >= seen + 2  # each change told (the streams' wake-up)
    finally:
        await rbac.stop()
    assert not rbac.rbac.deciding


@on_a_loop
async def test_auto_decides_nothing_where_a_webhook_may_deny_first(caplog):
    fake = fake_with_rbac()
    asked: list[str] = []

    def rules(namespace: str) -> dict:
        asked.append(namespace)
        return {"incomplete": True, "resourceRules": []}

    rbac = following(fake, "auto", rules)
    with caplog.at_level(logging.WARNING):
        await rbac.start()
        await until(lambda: rbac.settled)
    await asyncio.sleep(0.2)
    assert asked and not rbac.rbac.deciding and len(rbac.rbac) == 0  # not even followed
    assert rbac.state.startswith("off: ") and "webhook" in rbac.state
    assert "may deny what RBAC allows" in caplog.text
    await rbac.stop()


@on_a_loop
async def test_auto_decides_where_the_rules_are_complete_and_retries_the_question():
    fake = fake_with_rbac()
    answers = [ConnectionError("the API server is away"), {"incomplete": False}]

    def rules(namespace: str) -> dict:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    local_rbac_retry = local_rbac.DETECT_RETRY
    local_rbac.DETECT_RETRY = 0.05
    try:
        rbac = following(fake, "auto", rules)
        await rbac.start()
        await until(lambda: rbac.rbac.deciding)
        assert not answers
        await rbac.stop()
    finally:
        local_rbac.DETECT_RETRY = local_rbac_retry


@on_a_loop
async def test_auto_without_a_way_to_ask_decides_nothing():
    rbac = following(fake_with_rbac(), "auto", None)
    await rbac.start()
    await until(lambda: rbac.settled)
    assert not rbac.rbac.deciding and rbac.state.startswith("off: ")
    await rbac.stop()


@on_a_loop
async def test_false_follows_nothing():
    rbac = following(fake_with_rbac(), "false")
    await rbac.start()
    assert rbac.settled and rbac.state.startswith("off: ")
    await asyncio.sleep(0.1)
    assert len(rbac.rbac) == 0 and not rbac.rbac.deciding
    await rbac.stop()


def test_a_mode_it_does_not_know_is_refused():
    with pytest.raises(ValueError, match="auto, true, false"):
        following(fake_with_rbac(), "yes")


class _Breakable:
    """A lister-watcher whose watches fail while ``broken`` is set."""

    broken = False

    def __init__(self, inner) -> None:
        self.inner = inner

    def list(self, options):
        if _Breakable.broken:
            raise ConnectionError("connection refused")
        return self.inner.list(options)

    def watch(self, options):
        if _Breakable.broken:
            raise ConnectionError("connection refused")
        return self.inner.watch(options)


@on_a_loop
async def test_watches_that_stay_closed_stop_it_deciding(monkeypatch):
    monkeypatch.setattr(local_rbac, "CHECK_EVERY", 0.05)
    fake = fake_with_rbac()
    _Breakable.broken = False
    rbac = following(fake, lister_watcher=lambda r, ns: _Breakable(fake.lister_watcher(r, ns)),
                     stale_after=0.3)
    await rbac.start()
    try:
        await until(lambda: rbac.rbac.deciding)
        generation = rbac.rbac.generation
        _Breakable.broken = True
        fake.end_watches()  # the API server goes away: every watch ends, none reopens
        await until(lambda: not rbac.rbac.deciding, timeout=5)
        # a change like any other: kept decisions and open streams look again
        assert rbac.rbac.generation > generation
        assert rbac.state.startswith("behind")
    finally:
        _Breakable.broken = False
        await rbac.stop()


class _Refusing:
    """A lister-watcher of a gateway that may not list RBAC."""

    def __init__(self, resource) -> None:
        self.resource = resource

    def list(self, options):
        raise status_error(403, {"kind": "Status", "code": 403, "reason": "Forbidden",
                                 "message": f"cannot list {self.resource.resource}"},
                           f"cannot list {self.resource.resource}")

    def watch(self, options):
        return self.list(options)


@on_a_loop
async def test_a_gateway_that_may_not_list_rbac_asks_the_cluster_and_says_why(caplog):
    fake = fake_with_rbac()
    rbac = following(fake, lister_watcher=lambda r, ns: _Refusing(r))
    with caplog.at_level(logging.WARNING, logger="app.clusters.local_rbac"):
        await rbac.start()
        await until(lambda: "may not list and watch" in caplog.text)
    assert not rbac.rbac.deciding
    assert rbac.settled  # readiness does not wait for what will not come
    assert caplog.text.count("may not list and watch") == 1  # said once, not per retry
    await rbac.stop()


@on_a_loop
async def test_readiness_waits_for_rbac_no_longer_than_a_sync():
    """An API server that does not answer the lists: RBAC is not settled, and the cluster's
    readiness waits for it no longer than --sync-timeout (``waited``)."""
    fake = fake_with_rbac()
    _Breakable.broken = True
    rbac = following(fake, lister_watcher=lambda r, ns: _Breakable(fake.lister_watcher(r, ns)))
    try:
        await rbac.start()
        await asyncio.sleep(0.3)
        assert not rbac.settled and not rbac.rbac.deciding
        assert rbac.waited(0.2) and not rbac.waited(3600)
    finally:
        _Breakable.broken = False
        await rbac.stop()
