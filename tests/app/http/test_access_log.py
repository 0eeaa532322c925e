"""The access line: who, what, the decision and the answer, from what authorization left."""

from __future__ import annotations

import logging

from app.auth.authentication import Identity, unauthorized
from app.auth.identity import UserInfo
from app.http.access_log import AccessLog
from app.kube.access import Access
from app.kube.context import RequestContext
from app.kube.status import forbidden
from informer_core.discovery import APIResource

PODS = APIResource("", "v1", "pods", "Pod", True, frozenset({"list", "watch"}))


def scope(identity=None, access=None, denied=None) -> dict:
    context = RequestContext("resource")
    context.identity, context.access, context.denied = identity, access, denied
    return {"method": "GET", "path": "/api/v1/namespaces/a/pods", "query_string": b"limit=1",
            "client": ("10.0.0.7", 5555), "kcg": context}


def test_an_allowed_access_names_the_user_the_impersonator_and_the_access():
    identity = Identity(UserInfo("bob", groups=("dev",)), UserInfo("dashboard"), 0.0)
    line = AccessLog(logging.getLogger("test")).record(
        scope(identity, Access("list", PODS, "a")), 200, 0.0012)
    assert {k: v for k, v in line.items() if k != "time"} == {
        "method": "GET", "path": "/api/v1/namespaces/a/pods", "query": "limit=1",
        "client": "10.0.0.7", "user": "bob", "groups": ["dev"], "impersonatedBy": "dashboard",
        "verb": "list", "resource": "pods", "group": "", "version": "v1", "namespace": "a",
        "decision": "allowed", "status": 200, "latencyMs": 1.2}


def test_refusals_say_why():
    log = AccessLog(logging.getLogger("test"))
    assert log.record(scope(denied=unauthorized()), 401, 0.0)["decision"] == "unauthenticated"
    line = log.record(scope(access=Access("get", PODS, "a", "p"),
                               denied=forbidden("pods is forbidden")), 403, 0.0)
    assert (line["decision"], line["reason"], line["name"]) == ("forbidden", "pods is forbidden", "p")


def test_a_request_nobody_authorized_has_no_decision():
    line = AccessLog(logging.getLogger("test")).record({"method": "GET", "path": "/healthz"}, 200, 0)
    assert "decision" not in line and "user" not in line


def test_lines_are_json_on_the_access_logger(caplog):
    logger = logging.getLogger("test-access")
    with caplog.at_level(logging.INFO, logger="test-access"):
        AccessLog(logger).write(scope(), 200, 0.5)
    assert caplog.records[-1].getMessage().startswith('{"time":')
