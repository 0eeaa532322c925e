"""LocalTokens: the issuer's keys fetched, and fetched again for a kid not held — once for
every caller waiting, never more than once a second; what it cannot read, said once.

The informers and the tokens of a real API server: ``test_local_tokens_live.py``.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from app.auth.service_account_tokens import ServiceAccountTokens
from app.clusters import local_tokens
from app.clusters.local_tokens import LocalTokens, identity_metadata
from tests.app.auth.test_service_account_tokens import ISSUER, JWKS


class Documents:
    """The API server's documents, counted; ``status`` of the discovery document."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.asked: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, path: str):
        with self.lock:
            self.asked.append(path)
        if path == "/.well-known/openid-configuration":
            return self.status, {"issuer": ISSUER, "jwks_uri": "https://192.0.2.2/openid/v1/jwks"}
        if path == "/openid/v1/jwks":
            return 200, JWKS
        return 404, None


def following(documents: Documents) -> LocalTokens:
    return LocalTokens("test", ServiceAccountTokens(), lambda: None, documents)


def test_callers_waiting_for_a_kid_share_one_fetch_and_fetches_are_spaced(monkeypatch):
    monkeypatch.setattr(local_tokens, "REFETCH_AT_MOST_EVERY", 0.3)
    documents = Documents()
    tokens = following(documents)

    async def scenario() -> float:
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(tokens.refresh() for _ in range(50)))
        assert documents.asked.count("/openid/v1/jwks") == 1
        began = loop.time()
        await tokens.refresh()  # right after: waits for the spacing, then fetches
        return loop.time() - began

    waited = asyncio.run(scenario())
    assert documents.asked.count("/openid/v1/jwks") == 2
    assert 0.25 <= waited < 1.0
    assert tokens.tokens.keys.issuer == ISSUER and set(tokens.tokens.keys.keys) == {"rsa-1", "ec-1"}


def test_keys_the_gateway_may_not_read_are_said_once_and_nothing_is_judged(caplog):
    documents = Documents(status=403)
    tokens = following(documents)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert asyncio.run(tokens._fetch_keys()) is False
    said = [r for r in caplog.records if "issuer keys cannot be read (HTTP 403)" in r.getMessage()]
    assert len(said) == 1 and "system:service-account-issuer-discovery" in said[0].getMessage()
    assert tokens.tokens.keys is None and not tokens.deciding and tokens.settled


def test_only_what_a_tokens_check_reads_of_an_object_is_kept():
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "p", "namespace": "n", "uid": "u", "resourceVersion": "7",
        "deletionTimestamp": "2026-12-05T10:00:00Z", "labels": {"a": "b"},
        "annotations": {"big": "x" * 1000}, "managedFields": [{}]}}
    assert identity_metadata(pod)["metadata"] == {
        "name": "p", "namespace": "n", "uid": "u", "deletionTimestamp": "2026-12-05T10:00:00Z",
        "resourceVersion": "7"}
