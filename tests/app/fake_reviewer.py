"""A reviewer that answers token and access reviews from tables, counting what it was asked."""

from __future__ import annotations

import threading
import time

from app.auth.reviews import ReviewError


class TableReviewer:
    """``tokens``: token -> TokenReview ``user``; ``allowed``: (user, verb, resource, namespace) rows.

    A row's parts may be ``"*"``. Non-resource reviews match rows whose resource is
    the path. ``delay`` slows every review; ``failing`` makes every review fail (503).
    """

    def __init__(self, tokens: dict[str, dict] | None = None,
                 allowed: set[tuple[str, str, str, str]] | None = None) -> None:
        self.tokens = dict(tokens or {})
        self.allowed = set(allowed or ())
        self.token_reviews: list[tuple[str, tuple[str, ...]]] = []
        self.access_reviews: list[dict] = []
        self.delay = 0.0
        self.failing = False
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
        self._wait()
        if "nonResourceAttributes" in spec:
            attrs = spec["nonResourceAttributes"]
            want = (spec["user"], attrs["verb"], attrs["path"], "")
        else:
            attrs = spec["resourceAttributes"]
            want = (spec["user"], attrs["verb"], attrs["resource"], attrs.get("namespace", ""))
        for row in self.allowed:
            if all(r in ("*", w) for r, w in zip(row, want)):
                return {"allowed": True, "reason": "a row allows it"}
        return {"allowed": False}

    def _wait(self) -> None:
        if self.delay:
            time.sleep(self.delay)
        if self.failing:
            raise ReviewError(503, "the API server did not answer", headers={"Retry-After": "1"})
