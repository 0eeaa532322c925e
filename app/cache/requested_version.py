"""Answers never staler than the caller asked: a list or get naming a ``resourceVersion``.

A caller that just wrote through the API server and reads back with the version
it was given must see its write. The cache's view is at ``hub.rv`` (the newest
change it has applied); a request for a newer version waits, as the API
server's watch cache waits, up to three seconds for the watch to bring it, then
answers what the API server answers: 504, reason ``Timeout``, "Too large
resource version", ``Retry-After: 1``.

``resourceVersionMatch`` and ``sendInitialEvents`` are checked with the rules and
words of API servers since 1.27 (422): on a watch, only the watch-list form
(``sendInitialEvents`` with ``NotOlderThan``, ``app.streams.watch``). ``NotOlderThan`` is the same as a bare version. ``Exact`` is
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


def _invalid(errors: list[tuple[str, str, str]]) -> StatusError:
    """The API server's 422 for ``ListOptions``: each error (field, message, cause reason)
    said as its field errors are aggregated (one alone, several in brackets)."""
    said = [f"{where}: {message}" for where, message, _ in errors]
    text = said[0] if len(said) == 1 else "[" + ", ".join(said) + "]"
    return StatusError(422, f'ListOptions.meta.k8s.io "" is invalid: {text}', "Invalid",
                       {"group": "meta.k8s.io", "kind": "ListOptions", "causes": [
                           {"reason": cause, "message": message, "field": where}
                           for where, message, cause in errors]})


_FORBIDDEN, _NOT_SUPPORTED = "FieldValueForbidden", "FieldValueNotSupported"
_MATCH = "resourceVersionMatch"


def check_list_options(query: Query) -> None:
    """``resourceVersionMatch`` and ``sendInitialEvents`` as API servers since 1.27 validate
    them for a list or a watch (apimachinery's ``ValidateListOptions``, the WatchList feature
    on), every error at once.

    Raises:
        StatusError: 422 ``Invalid``, in the API server's words.
    """
    match, initial = query.resource_version_match, query.send_initial_events
    if not match and initial is None:
        return
    errors: list[tuple[str, str, str]] = []
    if query.watch:
        if initial is not None and match != "NotOlderThan":
            errors.append((_MATCH, "Forbidden: sendInitialEvents requires setting "
                                   "resourceVersionMatch to NotOlderThan", _FORBIDDEN))
        if match:
            if initial is None:
                errors.append((_MATCH, "Forbidden: resourceVersionMatch is forbidden for watch "
                                       "unless sendInitialEvents is provided", _FORBIDDEN))
            if match != "NotOlderThan":
                errors.append((_MATCH, f'Unsupported value: "{match}": supported values: '
                                       f'"NotOlderThan"', _NOT_SUPPORTED))
            if query.continue_key:
                errors.append((_MATCH, "Forbidden: resourceVersionMatch is forbidden when "
                                       "continue is provided", _FORBIDDEN))
    else:
        if match:
            if not query.resource_version:
                errors.append((_MATCH, "Forbidden: resourceVersionMatch is forbidden unless "
                                       "resourceVersion is provided", _FORBIDDEN))
            if query.continue_key:
                errors.append((_MATCH, "Forbidden: resourceVersionMatch is forbidden when "
                                       "continue is provided", _FORBIDDEN))
            if match not in _MATCHES:
                errors.append((_MATCH, f'Unsupported value: "{match}": supported values: '
                                       f'"Exact", "NotOlderThan", ""', _NOT_SUPPORTED))
            if match == "Exact" and query.resource_version == "0":
                errors.append((_MATCH, 'Forbidden: resourceVersionMatch "exact" is forbidden '
                                       'for resourceVersion "0"', _FORBIDDEN))
        if initial is not None:
            errors.append(("sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for "
                                                "list", _FORBIDDEN))
    if errors:
        raise _invalid(errors)


def too_large(requested: int, current: int) -> StatusError:
    """The API server's answer when its cache did not reach ``requested`` in time."""
    return StatusError(504, f"Timeout: Too large resource version: {requested}, current: {current}",
                       "Timeout", {"causes": [{"reason": "ResourceVersionTooLarge",
                                               "message": "Too large resource version"}],
                                   "retryAfterSeconds": 1},
                       headers={"Retry-After": "1"})


async def fresh_enough(hub: EventHub, query: Query, listing: bool,
                       wait: float = FRESHNESS_WAIT, history: bool = False) -> bool:
    """Return once the view may answer ``query``'s version, or whether the answer is the
    past: an ``Exact`` list at a version the view has moved past, with ``history`` kept
    (``app.history``: its store says then whether it has it). Else raise the API server's
    error.

    Raises:
        StatusError: 504 when the watch did not bring the version within ``wait``;
            410 for an ``Exact`` list at a version the view has moved past, without history.
    """
    text = query.resource_version
    if not text or text == "0":
        return False
    requested = int(text)
    if hub.rv < requested and not await hub.reached(requested, wait):
        raise too_large(requested, hub.rv)
    if listing and query.resource_version_match == "Exact" and hub.rv != requested:
        if history:
            return True
        raise StatusError(410, f"too old resource version: {requested} ({hub.rv}): this "
                               f"gateway's cache answers an Exact list only at its current "
                               f"version; list without resourceVersionMatch to read it",
                          "Expired")
    return False
