"""What a request asks to do: the name a list or watch is narrowed to, as the API server reads it."""

from __future__ import annotations

import pytest

from app.kube.access import narrowed_to
from informer_core.fields import parse_field_selector


@pytest.mark.parametrize("selector,name", [
    ("metadata.name=web", "web"),
    ("metadata.name==web", "web"),
    ("metadata.namespace=ns,metadata.name=web", "web"),
    ("metadata.name!=web", None),
    ("status.phase=Running", None),
    ("", None),
    ("metadata.name=..", None),  # no path could hold these: the API server names nothing
    ("metadata.name=a/b", None),
    ("metadata.name=a%2Fb", None),
])
def test_a_list_narrowed_to_one_object_names_it(selector, name):
    assert narrowed_to(parse_field_selector(selector)) == name


def test_no_selector_names_nothing():
    assert narrowed_to(None) is None
