"""The two questions the gateway asks the API server about a caller.

``TokenReview`` (authentication.k8s.io/v1): who holds this token?
``SubjectAccessReview`` (authorization.k8s.io/v1): may this user do this?
Both are ``create`` calls the gateway's own identity must be allowed
(the ``system:auth-delegator`` ClusterRole grants exactly these two).

``Reviewer`` is the seam: ``ApiReviewer`` posts the reviews with the
cluster's transport; tests may answer them from a table. The calls block
(they are round trips): ``app.auth.authentication`` and ``app.auth.access_review``
make them from a worker thread and keep the answers.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from app.kube.status import StatusError
from informer_core.rest import RawClient

__all__ = ["ApiReviewer", "ReviewError", "Reviewer"]

log = logging.getLogger(__name__)

_TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
_RULES_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"


class ReviewError(StatusError):
    """A review could not be made (the API server is unreachable or refused the gateway)."""


class Reviewer(Protocol):
    """Answers reviews; each method blocks for one round trip."""

    def review_token(self, token: str, audiences: tuple[str, ...]) -> dict:
        """A ``TokenReview``'s status: ``authenticated``, ``user``, ``audiences``, ``error``."""

    def review_access(self, spec: dict) -> dict:
        """A ``SubjectAccessReview``'s status: ``allowed``, ``denied``, ``reason``."""


class ApiReviewer:
    """Reviews by the API server, sent with the gateway's own credentials."""

    def __init__(self, api_client: Any, timeout: float = 10.0) -> None:
        self._client = RawClient(api_client)
        self._timeout = timeout

    def review_token(self, token: str, audiences: tuple[str, ...]) -> dict:
        spec: dict[str, Any] = {"token": token}
        if audiences:
            spec["audiences"] = list(audiences)
        return self._post(_TOKEN_REVIEWS, "TokenReview", "authentication.k8s.io/v1", spec)

    def review_access(self, spec: dict) -> dict:
        return self._post(_ACCESS_REVIEWS, "SubjectAccessReview", "authorization.k8s.io/v1", spec)

    def review_rules(self, namespace: str) -> dict:
        """A ``SelfSubjectRulesReview``'s status for the gateway's own identity: whether the
        cluster's authorizers can all list their rules (``incomplete``; ``app.clusters.
        local_rbac``). Any authenticated caller may ask it."""
        return self._post(_RULES_REVIEWS, "SelfSubjectRulesReview", "authorization.k8s.io/v1",
                          {"namespace": namespace})

    def _post(self, path: str, kind: str, api_version: str, spec: dict) -> dict:
        try:
            code, answer = self._client.post_json(
                path, {"apiVersion": api_version, "kind": kind, "spec": spec}, self._timeout)
        except ConnectionError as exc:
            # the cause (an address, a TLS error) to the log only: the caller reads the Status
            log.warning("the API server did not answer a %s: %s", kind, exc)
            raise ReviewError(503, f"could not review the caller's access: the API server did "
                                   f"not answer the {kind}",
                              headers={"Retry-After": "1"}) from None
        if code >= 300 or not isinstance(answer, dict):
            message = answer.get("message") if isinstance(answer, dict) else None
            raise ReviewError(503, f"could not review the caller's access: the API server "
                                   f"answered the {kind} with HTTP {code}"
                                   f"{': ' + message if message else ''} (the gateway's own "
                                   f"identity needs create on {path.rsplit('/', 1)[-1]}: bind "
                                   f"it to the ClusterRole system:auth-delegator)",
                              headers={"Retry-After": "1"})
        return answer.get("status") or {}
