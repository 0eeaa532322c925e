"""An answer of known length leaves in one write; streams and empty answers have their head
written at once, as before."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import httpx
import pytest

import app.http.limits as limits
from app.kube.envelope import HeadWithBody
from control_plane.fake import FakeCluster
from tests.app.conftest import run_gateway

NS = "one-write"
PATH = f"/api/v1/namespaces/{NS}/configmaps"


class _Transport:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def write(self, data) -> None:
        self.calls.append(("write", bytes(data)))

    def writelines(self, pieces) -> None:
        self.calls.append(("writelines", *map(bytes, pieces)))

    def is_closing(self) -> bool:
        return False


def _cycle(transport, chunked, length, method="GET"):
    return SimpleNamespace(transport=transport, chunked_encoding=chunked,
                           expected_content_length=length, scope={"method": method})


def test_a_head_with_a_length_goes_out_with_the_first_piece_of_its_body():
    transport = _Transport()
    cycle = _cycle(transport, False, 10)
    cycle.transport = held = HeadWithBody(transport, cycle)
    held.write(b"HEAD")
    assert transport.calls == []
    held.write(b"01234")
    assert transport.calls == [("writelines", b"HEAD", b"01234")]
    assert cycle.transport is transport  # the rest of the answer goes straight
    held.write(b"56789")  # a writer that kept the wrapper is not held up either
    assert transport.calls[-1] == ("write", b"56789")
    assert held.is_closing() is False


@pytest.mark.parametrize("chunked,length,method", [(True, 0, "GET"),  # a stream
                                                   (False, 0, "GET"),  # 304, 204, no body
                                                   (False, 10, "HEAD")])
def test_a_stream_or_an_answer_with_no_body_has_its_head_written_at_once(chunked, length, method):
    transport = _Transport()
    cycle = _cycle(transport, chunked, length, method)
    cycle.transport = held = HeadWithBody(transport, cycle)
    held.write(b"HEAD")
    assert transport.calls == [("write", b"HEAD")]
    assert cycle.transport is transport


@pytest.fixture
def recorded(monkeypatch):
    """Every connection's writes, as the served answers make them (uvicorn's real cycle)."""
    calls: list[list[str]] = []
    lock = threading.Lock()

    class Recording(HeadWithBody):
        def __init__(self, transport, cycle):
            mine: list[str] = []
            with lock:
                calls.append(mine)

            class Recorder:
                def write(self, data):
                    mine.append("write")
                    transport.write(data)

                def writelines(self, pieces):
                    mine.append(f"writelines{len(pieces)}")
                    transport.writelines(pieces)

                def __getattr__(self, name):
                    return getattr(transport, name)

            super().__init__(Recorder(), cycle)

    monkeypatch.setattr(limits, "HeadWithBody", Recording)
    cluster = FakeCluster()
    cluster.ensure_namespace(NS)
    cluster.create(PATH, {"metadata": {"name": "a"}})
    return cluster, calls


def test_served_lists_and_gets_leave_in_one_write_streams_and_heads_as_before(recorded):
    cluster, calls = recorded
    with run_gateway(cluster) as gw, httpx.Client(base_url=gw.url) as http:
        listed = http.get(PATH)
        assert listed.status_code == 200 and listed.json()["items"]
        assert http.get(f"{PATH}/a").json()["metadata"]["name"] == "a"
        assert http.get(f"{PATH}/nope").status_code == 404
        assert calls[-3:] == [["writelines2"], ["writelines2"], ["writelines2"]]
        assert http.head(PATH).status_code == 200
        assert calls[-1] == ["write"]
        unchanged = http.get(PATH, headers={"If-None-Match": listed.headers["etag"]})
        assert unchanged.status_code == 304 and calls[-1][0] == "write"  # (uvicorn's b"" after)
        with http.stream("GET", PATH, params={"watch": "1", "timeoutSeconds": "1"}) as watch:
            assert watch.status_code == 200  # the head came before any event
            lines = list(watch.iter_lines())
        assert calls[-1][0] == "write" and lines
