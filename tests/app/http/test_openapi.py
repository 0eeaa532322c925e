"""The gateway's OpenAPI document, and the live gateway fuzzed against it (schemathesis): every
operation, generated parameters and paths, each answer checked — no 5xx, a status code the
document lists, its content type, and a body that fits the schema (a Status for every error)."""

from __future__ import annotations

import copy

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (content_type_conformance, not_a_server_error,
                                 response_schema_conformance, status_code_conformance)

from app.http.openapi import document
from app.launch.demo import seed_workload
from control_plane.fake import FakeCluster
from tests.app.conftest import run_gateway

# Streams have suites of their own, and so has freshness: a resourceVersion the cache has not
# reached is answered 504 after 3 s by design (the API server's answer), not a fault.
_NOT_FUZZED = {"watch", "timeoutSeconds", "allowWatchBookmarks", "resourceVersion",
               "resourceVersionMatch"}
_CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
           response_schema_conformance]


def test_the_document_is_served_and_describes_every_path_family(http):
    served = http.get("/openapi.json")
    assert served.status_code == 200
    doc = served.json()
    assert doc == document()
    paths = set(doc["paths"])
    assert {"/api/{version}/namespaces/{namespace}/{resource}/{name}",
            "/apis/{group}/{version}/{resource}", "/api", "/apis", "/version", "/readyz"} <= paths
    params = {p["name"] for p in doc["paths"]["/apis/{group}/{version}/{resource}"]["get"]["parameters"]}
    assert {"labelSelector", "fieldSelector", "limit", "continue", "resourceVersion",
            "resourceVersionMatch", "watch", "timeoutSeconds"} <= params


class _QuickDiscovery(FakeCluster):
    """Every request for an unknown resource waits for a discovery refresh made after it
    (refreshes are a second apart); here, in memory, they may come as fast as asked."""

    def discovery(self, **kwargs):
        return super().discovery(min_refresh_interval=0.01, **kwargs)


@pytest.fixture(scope="module")
def gateway():
    """This module's gateway (the name exempts its threads from the per-test check)."""
    cluster = _QuickDiscovery()
    seed_workload(cluster, "demo-shop")
    with run_gateway(cluster) as running:
        yield running


def fuzzable() -> dict:
    doc = copy.deepcopy(document())
    for item in doc["paths"].values():
        item["get"]["parameters"] = [p for p in item["get"].get("parameters", [])
                                     if p["name"] not in _NOT_FUZZED]
    return doc


_SCHEMA = schemathesis.openapi.from_dict(fuzzable())
# every operation with valid input, and (where it takes a query) with invalid input
_CASES = [pytest.param(op, mode, id=f"{op.path}-{mode.value}")
          for op in (result.ok() for result in _SCHEMA.get_all_operations())
          for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
          if mode is GenerationMode.POSITIVE
          or any(p["in"] == "query" for p in op.definition.raw.get("parameters", []))]


@pytest.mark.parametrize("operation, mode", _CASES)
def test_the_gateway_answers_every_generated_request_as_documented(gateway, operation, mode):
    calls = []

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=100, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def check(case):
        response = case.call_and_validate(base_url=gateway.url, checks=_CHECKS, timeout=10)
        calls.append(response.status_code)

    check()
    assert calls, "nothing was sent"


def test_the_http_reference_names_every_path_parameter_and_code_of_the_document():
    """``docs/http-api.md`` is the reference users read: it leaves out nothing the gateway's
    own OpenAPI document describes (a path, a query parameter, a status code)."""
    from pathlib import Path

    reference = (Path(__file__).resolve().parents[3] / "docs" / "http-api.md").read_text()
    doc = document()
    missing = []
    for path, operations in doc["paths"].items():
        if f"`{path}`" not in reference:
            missing.append(f"path {path}")
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "query" and f"`{parameter['name']}" not in reference:
                    missing.append(f"parameter {parameter['name']}")
            for code in operation.get("responses", {}):
                if f"`{code}`" not in reference:
                    missing.append(f"status {code}")
    assert not sorted(set(missing)), sorted(set(missing))
    assert "`/openapi.json`" in reference
