"""``summary=``: counts per value over the selected objects."""

from __future__ import annotations

import orjson
import pytest

from app.query.values import ValueCache
from app.query.summary import SummaryError, parse_summary, summary_bytes
from informer_core.encoded import EncodedObject


def pod(ns: str, name: str, phase: str | None, ready: bool | None = None) -> EncodedObject:
    status = {} if phase is None else {"phase": phase}
    if ready is not None:
        status["ready"] = ready
    return EncodedObject.from_dict({"metadata": {"namespace": ns, "name": name,
                                                 "resourceVersion": "1"}, "status": status})


def test_counts_by_value_with_missing_under_empty():
    objects = [pod("a", "1", "Running", True), pod("a", "2", "Running"), pod("b", "3", "Failed", False),
               pod("b", "4", None)]
    doc = orjson.loads(summary_bytes(parse_summary("status.phase,metadata.namespace,status.ready"),
                                     ValueCache(), objects, "42"))
    assert doc == {"apiVersion": "v1", "kind": "Summary", "metadata": {"resourceVersion": "42"},
                   "total": 4, "counts": {"status.phase": {"": 1, "Failed": 1, "Running": 2},
                                          "metadata.namespace": {"a": 2, "b": 2},
                                          "status.ready": {"": 2, "false": 1, "true": 1}}}


def test_nothing_selected_counts_nothing():
    doc = orjson.loads(summary_bytes(parse_summary("status.phase"), ValueCache(), [], "1"))
    assert doc["total"] == 0 and doc["counts"] == {"status.phase": {}}


@pytest.mark.parametrize("text", ["", "a,,b", "spec.*.x", ",".join(f"p{i}" for i in range(17))])
def test_malformed_summaries(text):
    with pytest.raises(SummaryError):
        parse_summary(text)
