"""A reviewer that answers token and access reviews from tables, counting what it was asked."""

from __future__ import annotations

import threading
import time

from app.auth.reviews import ReviewError


class TableReviewer:
    """``tokens``: token -> TokenReview ``user``; ``allowed``: (user, verb, resource, namespace) rows.

    A row's parts may be ``"*"``. Non-resource reviews match rows whose resource is
    the path. ``delay`` slows every review; ``failing`` makes every review fail (503);
    ``allow_reason`` is the reason of an allow (the API server's RBAC says ``RBAC: allowed
    by ...``); ``lagging`` access reviews more are allowed whatever the rows say, as an API
    server whose RBAC is a moment behind its storage allows them.
    """

    def __init__(self, tokens: dict[str, dict] | None = None,
                 allowed: set[tuple[str, str, str, str]] | None = None) -> None:
        self.tokens = dict(tokens or {})
        self.allowed = set(allowed or ())
        self.token_reviews: list[tuple[str, tuple[str, ...]]] = []
        self.access_reviews: list[dict] = []
        self.delay = 0.0
        self.failing = False
        self.allow_reason = "a row allows it"
        self.lagging = 0
        self.audiences: list[str] | None = None  # None: echo the audiences asked for
        self._lock = threading.Lock()

    def review_token(self, token: str, audiences: tuple[str, ...]) -> dict:
        with self._lock:
            self.token_reviews.append((token, audiences))
        self._wait()
        user = self.tokens.get(token)
        if user is None:
            return {"authenticated": False, "error": "invalid bearer token"}
        given = list(audiences) if self.audiences is None else self.audiences
        return {"authenticated": True, "user": user, "audiences": given}

    def review_access(self, spec: dict) -> dict:
        with self._lock:
            self.access_reviews.append(spec)
            lagging, self.lagging = self.lagging, max(0, self.lagging - 1)
        self._wait()
        if lagging:
            return {"allowed": True, "reason": self.allow_reason}
        if "nonResourceAttributes" in spec:
            attrs = spec["nonResourceAttributes"]
            want = (spec["user"], attrs["verb"], attrs["path"], "")
        else:
            attrs = spec["resourceAttributes"]
            want = (spec["user"], attrs["verb"], attrs["resource"], attrs.get("namespace", ""))
        for row in self.allowed:
            if all(r in ("*", w) for r, w in zip(row, want)):
                return {"allowed": True, "reason": self.allow_reason}
        return {"allowed": False}

    def _wait(self) -> None:
        if self.delay:
            time.sleep(self.delay)
        if self.failing:
            raise ReviewError(503, "the API server did not answer", headers={"Retry-After": "1"})
