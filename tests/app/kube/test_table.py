"""Table answers: few rows are rendered on the event loop, many on a worker thread."""

from __future__ import annotations

import asyncio
import gc
import threading

import orjson
import pytest

from app.kube.printers import PRINTERS
from app.kube.table import ROWS_ON_THE_LOOP, render_table, table_bytes

POD_COLUMNS, POD_ROW = PRINTERS[("", "pods")]


def pods(count: int) -> list[dict]:
    return [{"metadata": {"namespace": "ns", "name": f"p-{i:04d}", "resourceVersion": str(i + 1),
                          "creationTimestamp": "2026-11-27T00:00:00Z"},
             "spec": {"containers": [{"name": "c", "image": "nginx"}]},
             "status": {"phase": "Running"}} for i in range(count)]


@pytest.mark.parametrize("count,off_the_loop", [(ROWS_ON_THE_LOOP - 1, False),
                                                (ROWS_ON_THE_LOOP, True)])
def test_a_long_table_is_rendered_off_the_loop_with_the_collector_paused(count, off_the_loop):
    seen = []

    def row(obj, now):
        seen.append((threading.get_ident(), gc.isenabled()))
        return POD_ROW(obj, now)

    async def scenario():
        loop_thread = threading.get_ident()
        body = await render_table(count, iter(pods(count)), (POD_COLUMNS, row),
                                  resource_version="7")
        return loop_thread, body

    loop_thread, body = asyncio.run(scenario())
    assert len(seen) == count
    assert all((thread != loop_thread) == off_the_loop for thread, _ in seen)
    assert all(enabled != off_the_loop for _, enabled in seen)
    assert gc.isenabled()
    expected = orjson.loads(table_bytes(pods(count), (POD_COLUMNS, POD_ROW), resource_version="7"))
    got = orjson.loads(body)
    age = [c["name"] for c in POD_COLUMNS].index("Age")
    for doc in (expected, got):  # the age counts from the moment of rendering
        for r in doc["rows"]:
            r["cells"][age] = ""
    assert got == expected
