"""Answers never staler than the caller asked: a list or get naming a ``resourceVersion``.

A caller that just wrote through the API server and reads back with the version
it was given must see its write. The cache's view is at ``hub.rv`` (the newest
change it has applied); a request for a newer version waits, as the API
server's watch cache waits, up to three seconds for the watch to bring it, then
answers what the API server answers: 504, reason ``Timeout``, "Too large
resource version", ``Retry-After: 1``.

``resourceVersionMatch`` (lists only) is checked with the API server's rules
and words (422). ``NotOlderThan`` is the same as a bare version. ``Exact`` is
answered when the view is at exactly that version — a list asked again at the
version it was first answered at, nothing having changed since; any older
version is history the cache does not keep: 410 ``Expired``, list again.
Version ``0`` (or none) is "whatever the cache holds", as on the API server.
"""

from __future__ import annotations

from app.cache.hub import EventHub
from app.kube.request import Query
from app.kube.status import StatusError

__all__ = ["FRESHNESS_WAIT", "check_list_options", "fresh_enough"]

FRESHNESS_WAIT = 3.0  # seconds, the API server watch cache's own bound
_MATCHES = ("Exact", "NotOlderThan", "")


def _invalid(message: str, cause: str) -> StatusError:
    return StatusError(422, f'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: {message}',
                       "Invalid", {"group": "meta.k8s.io", "kind": "ListOptions", "causes": [
                           {"reason": cause, "message": message, "field": "resourceVersionMatch"}]})


def check_list_options(query: Query) -> None:
    """``resourceVersionMatch`` as the API server validates it for a list or watch.

    Raises:
        StatusError: 422 ``Invalid``, in the API server's words.
    """
    match = query.resource_version_match
    if not match:
        return
    if match not in _MATCHES:
        raise _invalid(f'Unsupported value: "{match}": supported values: "Exact", '
                       f'"NotOlderThan", ""', "FieldValueNotSupported")
    if query.watch:
        raise _invalid("Forbidden: resourceVersionMatch is forbidden for watch",
                       "FieldValueForbidden")
    if not query.resource_version:
        raise _invalid("Forbidden: resourceVersionMatch is forbidden unless resourceVersion is "
                       "provided", "FieldValueForbidden")
    if query.continue_key:
        raise _invalid("Forbidden: resourceVersionMatch is forbidden when continue is provided",
                       "FieldValueForbidden")
    if match == "Exact" and query.resource_version == "0":
        raise _invalid('Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion '
                       '"0"', "FieldValueForbidden")


def too_large(requested: int, current: int) -> StatusError:
    """The API server's answer when its cache did not reach ``requested`` in time."""
    return StatusError(504, f"Timeout: Too large resource version: {requested}, current: {current}",
                       "Timeout", {"causes": [{"reason": "ResourceVersionTooLarge",
                                               "message": "Too large resource version"}],
                                   "retryAfterSeconds": 1},
                       headers={"Retry-After": "1"})


async def fresh_enough(hub: EventHub, query: Query, listing: bool,
                       wait: float = FRESHNESS_WAIT) -> None:
    """Return once the view may answer ``query``'s version; else raise the API server's error.

    Raises:
        StatusError: 504 when the watch did not bring the version within ``wait``;
            410 for an ``Exact`` list at a version the view has moved past.
    """
    text = query.resource_version
    if not text or text == "0":
        return
    requested = int(text)
    if hub.rv < requested and not await hub.reached(requested, wait):
        raise too_large(requested, hub.rv)
    if listing and query.resource_version_match == "Exact" and hub.rv != requested:
        raise StatusError(410, f"too old resource version: {requested} ({hub.rv}): this "
                               f"gateway's cache answers an Exact list only at its current "
                               f"version; list without resourceVersionMatch to read it",
                          "Expired")
