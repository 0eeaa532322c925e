"""uvicorn's server woken once a second while idle, and at once to exit."""

from __future__ import annotations

import email.utils
import threading
import time
import types

import httpx
import uvicorn

from app.process import ticks
from app.process.ticks import SecondTickServer
from control_plane.cluster import free_port


async def _app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def _serving() -> tuple[SecondTickServer, threading.Thread, str]:
    port = free_port()
    server = SecondTickServer(uvicorn.Config(_app, host="127.0.0.1", port=port,
                                             log_config=None, lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    return server, thread, f"http://127.0.0.1:{port}"


def test_an_idle_server_ticks_once_a_second_and_its_date_header_stays_current():
    server, thread, url = _serving()
    try:
        first = server.ticks
        time.sleep(3.0)
        assert server.ticks - first <= 4  # uvicorn's own loop: about 30
        answer = httpx.get(url)
        sent = email.utils.parsedate_to_datetime(answer.headers["date"]).timestamp()
        assert time.time() - sent < 2.0  # renewed each second (the header counts whole ones)
    finally:
        server.should_exit = True
        thread.join(10)


def test_a_wall_clock_held_still_does_not_make_the_server_tick_ten_times_a_second(monkeypatch):
    # The wall clock stepped back or held while the loop's monotonic clock runs on: each
    # delay to "the next second" comes out the same fraction of a second, again and again.
    held = time.time() // 1 + 0.93  # 70 ms before a second, for as long as it is held
    monkeypatch.setattr(ticks, "time", types.SimpleNamespace(time=lambda: held))
    server, thread, _ = _serving()
    try:
        first = server.ticks
        time.sleep(3.0)
        assert server.ticks - first <= 4  # trusting the wall clock alone: about 43
    finally:
        server.should_exit = True
        thread.join(10)


def test_asked_to_exit_from_another_thread_the_server_stops_without_waiting_for_a_tick():
    server, thread, _ = _serving()
    time.sleep(1.0 - time.time() % 1.0 + 0.05)  # just after a tick: the next is a second away
    asked = time.monotonic()
    server.should_exit = True
    thread.join(10)
    assert not thread.is_alive()
    assert time.monotonic() - asked < 0.5
