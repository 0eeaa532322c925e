"""RBAC decided as the API server's RBAC authorizer decides (the real API server's own answers for
random RBAC: ``test_rbac_live.py``)."""

from __future__ import annotations

import pytest

from app.auth.access_review import Attributes
from app.auth.rbac import RBAC, Rule, rule_allows, service_account_user


def rule(**fields) -> Rule:
    names = {"verbs": "verbs", "groups": "apiGroups", "resources": "resources",
             "names": "resourceNames", "urls": "nonResourceURLs"}
    return Rule.of({names[k]: v for k, v in fields.items()})


GET_PODS = Attributes("get", "pods", "", "v1", "ns", "web")


@pytest.mark.parametrize("the_rule,attrs,allowed", [
    (rule(verbs=["get"], groups=[""], resources=["pods"]), GET_PODS, True),
    (rule(verbs=["*"], groups=["*"], resources=["*"]), GET_PODS, True),
    (rule(verbs=["list"], groups=[""], resources=["pods"]), GET_PODS, False),
    (rule(verbs=["get"], groups=["apps"], resources=["pods"]), GET_PODS, False),
    (rule(verbs=["get"], groups=[""], resources=["pods/log"]), GET_PODS, False),
    # a subresource: named whole, or */sub for any resource; never by the resource alone
    (rule(verbs=["get"], groups=[""], resources=["pods/log"]),
     GET_PODS._replace(subresource="log"), True),
    (rule(verbs=["get"], groups=[""], resources=["*/log"]),
     GET_PODS._replace(subresource="log"), True),
    (rule(verbs=["get"], groups=[""], resources=["pods"]),
     GET_PODS._replace(subresource="log"), False),
    (rule(verbs=["get"], groups=[""], resources=["*/logs"]),
     GET_PODS._replace(subresource="log"), False),
    # resource names: only an access naming one of them; never a list
    (rule(verbs=["get"], groups=[""], resources=["pods"], names=["web"]), GET_PODS, True),
    (rule(verbs=["get"], groups=[""], resources=["pods"], names=["db"]), GET_PODS, False),
    (rule(verbs=["list"], groups=[""], resources=["pods"], names=["web"]),
     GET_PODS._replace(verb="list", name=""), False),
    # non-resource URLs: the path, *, or a prefix ending in *
    (rule(verbs=["get"], urls=["/metrics"]), Attributes("get", path="/metrics"), True),
    (rule(verbs=["get"], urls=["/apis/*"]), Attributes("get", path="/apis/apps/v1"), True),
    (rule(verbs=["get"], urls=["/apis*"]), Attributes("get", path="/apis"), True),
    (rule(verbs=["get"], urls=["/apis/*"]), Attributes("get", path="/apis"), False),
    (rule(verbs=["get"], urls=["*"]), Attributes("get", path="/healthz"), True),
    (rule(verbs=["get"], urls=["/metrics"]), Attributes("get", path="/metrics/x"), False),
    # a resource rule never allows a path, a path rule never a resource
    (rule(verbs=["*"], groups=["*"], resources=["*"]), Attributes("get", path="/metrics"), False),
    (rule(verbs=["*"], urls=["*"]), GET_PODS, False),
])
def test_a_rule_allows_what_the_api_servers_rbac_authorizer_allows(the_rule, attrs, allowed):
    assert rule_allows(the_rule, attrs) is allowed


def test_unreadable_rule_fields_match_nothing():
    assert Rule.of({"verbs": "get", "apiGroups": [""], "resources": ["pods"]}) == \
        Rule((), ("",), ("pods",), (), ())
    assert not rule_allows(Rule.of({"verbs": None}), GET_PODS)


def _role(name: str, *rules: dict, namespace: str = "") -> dict:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"metadata": meta, "rules": list(rules)}


def _binding(name: str, role_kind: str, role: str, *subjects: dict, namespace: str = "") -> dict:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"metadata": meta, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                          "kind": role_kind, "name": role},
            "subjects": list(subjects)}


READ_PODS = {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}


@pytest.fixture
def rbac() -> RBAC:
    rbac = RBAC()
    rbac.set_cluster_role(_role("pod-reader", READ_PODS))
    rbac.set_role(_role("local-reader", READ_PODS, namespace="team"))
    return rbac


def test_a_cluster_role_binding_allows_everywhere_and_a_role_binding_in_its_namespace(rbac):
    rbac.set_binding("ClusterRoleBinding", _binding("all", "ClusterRole", "pod-reader",
                                                    {"kind": "User", "name": "alice"}))
    rbac.set_binding("RoleBinding", _binding("here", "Role", "local-reader",
                                             {"kind": "Group", "name": "devs"}, namespace="team"))
    anywhere = GET_PODS._replace(namespace="elsewhere")
    assert rbac.allows("alice", (), anywhere) == \
        'RBAC: allowed by ClusterRoleBinding "all" of ClusterRole "pod-reader"'
    assert rbac.allows("alice", (), anywhere._replace(namespace="")) is not None
    assert rbac.allows("bob", ("devs",), GET_PODS._replace(namespace="team")) is not None
    assert rbac.allows("bob", ("devs",), anywhere) is None
    assert rbac.allows("bob", ("devs",), GET_PODS._replace(namespace="")) is None
    assert rbac.allows("carol", ("others",), anywhere) is None


def test_a_role_binding_may_name_a_cluster_role_for_its_namespace_alone(rbac):
    rbac.set_binding("RoleBinding", _binding("b", "ClusterRole", "pod-reader",
                                             {"kind": "User", "name": "dan"}, namespace="team"))
    assert rbac.allows("dan", (), GET_PODS._replace(namespace="team")) is not None
    assert rbac.allows("dan", (), GET_PODS._replace(namespace="other")) is None


def test_service_account_subjects_take_the_bindings_namespace_when_they_give_none(rbac):
    rbac.set_binding("RoleBinding", _binding("b", "ClusterRole", "pod-reader",
                                             {"kind": "ServiceAccount", "name": "robot"},
                                             namespace="team"))
    rbac.set_binding("ClusterRoleBinding", _binding("c", "ClusterRole", "pod-reader",
                                                    {"kind": "ServiceAccount", "name": "lost"}))
    robot = service_account_user("team", "robot")
    assert robot == "system:serviceaccount:team:robot"
    assert rbac.allows(robot, (), GET_PODS._replace(namespace="team")) is not None
    # a ClusterRoleBinding's subject without a namespace is nobody's ServiceAccount
    assert rbac.allows(service_account_user("team", "lost"), (), GET_PODS) is None
    assert rbac.allows("system:serviceaccount::lost", (), GET_PODS) is not None


def test_system_masters_may_do_anything_and_a_missing_role_grants_nothing(rbac):
    assert rbac.allows("root", ("system:masters",), GET_PODS) == \
        'member of the group "system:masters"'
    rbac.set_binding("ClusterRoleBinding", _binding("x", "ClusterRole", "absent",
                                                    {"kind": "User", "name": "eve"}))
    assert rbac.allows("eve", (), GET_PODS) is None
    rbac.set_cluster_role(_role("absent", READ_PODS))  # created after its binding
    assert rbac.allows("eve", (), GET_PODS) is not None


def test_changes_apply_at_once_and_are_counted(rbac):
    seen = []
    rbac.on_change(lambda: seen.append(rbac.generation))
    start = rbac.generation
    rbac.set_binding("RoleBinding", _binding("b", "Role", "local-reader",
                                             {"kind": "User", "name": "fay"}, namespace="team"))
    here = GET_PODS._replace(namespace="team")
    assert rbac.allows("fay", (), here) is not None and rbac.changed(start)
    rbac.set_binding("RoleBinding", _binding("b", "Role", "local-reader",
                                             {"kind": "User", "name": "gus"}, namespace="team"))
    assert rbac.allows("fay", (), here) is None, "a subject taken out of a binding"
    assert rbac.allows("gus", (), here) is not None
    rbac.set_role(_role("local-reader", {**READ_PODS, "verbs": ["list"]}, namespace="team"))
    assert rbac.allows("gus", (), here) is None, "a rule narrowed"
    rbac.delete_binding("RoleBinding", "team", "b")
    assert rbac.allows("gus", (), here._replace(verb="list", name="")) is None
    assert len(rbac) == 0 and seen == [start + 1, start + 2, start + 3, start + 4]
