"""The request's context: made once at the entry, with the request's cluster; one scope key."""

from __future__ import annotations

from app.kube.context import RequestContext, context_of


def test_the_context_is_made_once_and_found_again():
    scope: dict = {}
    context = context_of(scope)
    assert context_of(scope) is context and scope == {"kcg": context}
    assert (context.route, context.cluster, context.identity, context.access, context.denied) == (
        "other", None, None, None, None)


def test_what_the_entry_made_is_what_everyone_reads():
    cluster = object()
    scope = {"kcg": RequestContext("resource", cluster)}
    assert context_of(scope).cluster is cluster and context_of(scope).route == "resource"


def test_a_context_has_no_room_for_notes_it_does_not_name():
    import pytest

    with pytest.raises(AttributeError):
        RequestContext().anything_else = 1
