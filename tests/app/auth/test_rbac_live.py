"""The gateway's RBAC decisions against the real API server's own: seeded random Roles, ClusterRoles
and bindings (every rule form: ``*``, ``resource/subresource``, ``*/subresource``, resource
names, non-resource URLs with a trailing ``*``; subjects that are users, groups and
ServiceAccounts with and without a namespace), then random accesses, each decided by
``app.auth.rbac`` from the cluster's objects — followed as the gateway follows them
(``app.clusters.local_rbac``) — and by the cluster's ``SubjectAccessReview``
for the same identity. The suite runs ``KCG_RBAC_ACCESSES`` accesses (10,000 by default,
about 10 s); ``make rbac-differential`` runs 100,000 over four times the objects."""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
import uuid

import pytest

from app.auth.access_review import Attributes
from app.auth.rbac import service_account_user
from app.auth.reviews import ApiReviewer
from app.clusters.cluster import build_factory, strip_managed_fields
from app.clusters.local_rbac import LocalRBAC
from app.settings import Settings
from control_plane.kubeapi import KubeAPI
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster

ACCESSES = int(os.environ.get("KCG_RBAC_ACCESSES", "10000"))
SCALE = int(os.environ.get("KCG_RBAC_SCALE", "1"))  # objects: 1x, or more for the long run
SEED = int(os.environ.get("KCG_RBAC_SEED", "0")) or random.SystemRandom().randrange(1, 2**31)

_RBAC = "/apis/rbac.authorization.k8s.io/v1"
_VERBS = ("get", "list", "watch", "create", "delete", "impersonate")
_GROUPS = ("", "apps", "batch", "example.com")
_RESOURCES = ("pods", "configmaps", "deployments", "jobs", "widgets", "secrets")
_SUBRESOURCES = ("", "", "", "log", "status", "scale")
_NAMES = ("", "", "a", "b", "c")
_PATHS = ("/metrics", "/healthz", "/apis", "/apis/apps", "/apis/apps/v1", "/api", "/api/v1",
          "/logs/x", "/version")
_USERS = ("ann", "ben", "cid", "dee", "eli")
_TEAMS = ("red", "blue", "green")


def _some(rng: random.Random, choices, most: int = 3) -> list[str]:
    return sorted(set(rng.choice(choices) for _ in range(rng.randint(1, most))))


def _resource_rule(rng: random.Random) -> dict:
    rule = {"verbs": _some(rng, (*_VERBS, "*")), "apiGroups": _some(rng, (*_GROUPS, "*"), 2),
            "resources": _some(rng, (*_RESOURCES, "*", "pods/log", "*/status", "*/scale",
                                     "deployments/scale", "pods/status"), 3)}
    if rng.random() < 0.3:
        rule["resourceNames"] = _some(rng, ("a", "b", "c"), 2)
    return rule


def _url_rule(rng: random.Random) -> dict:
    return {"verbs": _some(rng, ("get", "post", "*"), 2),
            "nonResourceURLs": _some(rng, ("/metrics", "/apis/*", "/api*", "*", "/healthz",
                                           "/logs/*", "/apis/apps"), 2)}


def _subjects(rng: random.Random, namespaces: list[str], group: str,
              namespaced: bool) -> list[dict]:
    """A binding's subjects; a ServiceAccount without a namespace only in a RoleBinding (the
    API server requires one in a ClusterRoleBinding)."""
    subjects = []
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(("User", "Group", "ServiceAccount", "ServiceAccount"))
        if kind == "User":
            subjects.append({"kind": "User", "apiGroup": "rbac.authorization.k8s.io",
                             "name": rng.choice(_USERS) + group})
        elif kind == "Group":
            subjects.append({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io",
                             "name": rng.choice((*(t + group for t in _TEAMS),
                                                 "system:authenticated",
                                                 "system:serviceaccounts",
                                                 f"system:serviceaccounts:{namespaces[0]}"))})
        else:
            account = {"kind": "ServiceAccount", "name": rng.choice(("robot", "agent"))}
            if not namespaced or rng.random() < 0.6:
                account["namespace"] = rng.choice(namespaces)
            subjects.append(account)
    return subjects


@pytest.fixture(scope="module")
def world(local_cluster):
    """Random RBAC in three namespaces of its own (and cluster-wide objects named for it),
    removed after; the seed is printed so a disagreement can be replayed."""
    rng = random.Random(SEED)
    print(f"\nKCG_RBAC_SEED={SEED}")
    kube = KubeAPI.for_cluster(local_cluster)
    tag = uuid.uuid4().hex[:6]
    namespaces = [f"rbac-{tag}-{n}" for n in range(3)]
    for namespace in namespaces:
        kube.ensure_namespace(namespace)
    cluster_wide: list[str] = []
    group = f"-{tag}"  # this run's users and groups: nobody else's bindings name them
    for n in range(6 * SCALE):
        name = f"rbac-{tag}-role-{n}"
        rules = [_resource_rule(rng) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.4:
            rules.append(_url_rule(rng))
        kube.create(f"{_RBAC}/clusterroles", {"metadata": {"name": name}, "rules": rules})
        cluster_wide.append(f"{_RBAC}/clusterroles/{name}")
    for namespace in namespaces:
        for n in range(3 * SCALE):
            kube.create(f"{_RBAC}/namespaces/{namespace}/roles", {
                "metadata": {"name": f"role-{n}"},
                "rules": [_resource_rule(rng) for _ in range(rng.randint(1, 3))]})
    for n in range(4 * SCALE):
        name = f"rbac-{tag}-binding-{n}"
        kube.create(f"{_RBAC}/clusterrolebindings", {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": f"rbac-{tag}-role-{rng.randrange(6 * SCALE + 1)}"},  # one absent
            "subjects": _subjects(rng, namespaces, group, namespaced=False)})
        cluster_wide.append(f"{_RBAC}/clusterrolebindings/{name}")
    for namespace in namespaces:
        for n in range(4 * SCALE):
            cluster_role = rng.random() < 0.5
            kube.create(f"{_RBAC}/namespaces/{namespace}/rolebindings", {
                "metadata": {"name": f"binding-{n}"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                            "kind": "ClusterRole" if cluster_role else "Role",
                            "name": f"rbac-{tag}-role-{rng.randrange(6 * SCALE)}" if cluster_role
                            else f"role-{rng.randrange(3 * SCALE + 1)}"},  # one absent
                "subjects": _subjects(rng, namespaces, group, namespaced=True)})
    # what the gateway holds, as it comes to hold it: followed by its informers (and the
    # cluster's authorizers asked, with auto, whether RBAC's allows may stand)
    client = local_cluster.api_client()
    factory = build_factory(Settings(), client)
    following = LocalRBAC("differential", lambda: factory.sibling(transform=strip_managed_fields),
                          "auto", ApiReviewer(client).review_rules)
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, name="differential-loop", daemon=True)
    runner.start()
    try:
        asyncio.run_coroutine_threadsafe(following.start(), loop).result(10)
        rbac = following.rbac
        # deciding: listed after every object above was written, and the watches open
        wait_until(lambda: rbac.deciding, 30, message="the cluster's RBAC followed")
        yield rng, kube, rbac, namespaces, group
    finally:
        asyncio.run_coroutine_threadsafe(following.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        runner.join(10)
        loop.close()
        client.close()
        for path in cluster_wide:
            kube.delete(path)
        for namespace in namespaces:
            kube.delete(f"/api/v1/namespaces/{namespace}")


def _identity(rng: random.Random, namespaces: list[str], group: str) -> tuple[str, list[str]]:
    if rng.random() < 0.45:
        namespace = rng.choice(namespaces)
        user = service_account_user(namespace, rng.choice(("robot", "agent", "other")))
        groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}",
                  "system:authenticated"]
    else:
        user = rng.choice(_USERS) + group
        groups = _some(rng, tuple(t + group for t in _TEAMS), 2)
        if rng.random() < 0.8:
            groups.append("system:authenticated")
    if rng.random() < 0.01:
        groups.append("system:masters")
    return user, groups


def _access(rng: random.Random, namespaces: list[str]) -> Attributes:
    if rng.random() < 0.12:
        return Attributes(rng.choice(("get", "post", "list")), path=rng.choice(_PATHS))
    return Attributes(rng.choice(_VERBS), rng.choice(_RESOURCES), rng.choice(_GROUPS), "v1",
                      rng.choice((*namespaces, *namespaces, "")), rng.choice(_NAMES),
                      rng.choice(_SUBRESOURCES))


def test_every_decision_equals_the_api_servers_subject_access_review(world):
    rng, kube, rbac, namespaces, group = world
    disagreements, allowed = [], 0
    started = time.monotonic()
    for _ in range(ACCESSES):
        user, groups = _identity(rng, namespaces, group)
        attrs = _access(rng, namespaces)
        status = kube.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": groups, **attrs.review_spec()}})["status"]
        theirs = bool(status.get("allowed"))
        ours = rbac.allows(user, groups, attrs)
        allowed += theirs
        if theirs != (ours is not None):
            disagreements.append((user, groups, attrs, status, ours))
    seconds = time.monotonic() - started
    print(f"{ACCESSES} accesses ({allowed} allowed) over {len(rbac)} bindings in {seconds:.1f} s, "
          f"seed {SEED}: {len(disagreements)} disagreements")
    assert disagreements == [], disagreements[:5]
    assert 0.05 < allowed / ACCESSES < 0.95, "random RBAC that allows both some and not all"
