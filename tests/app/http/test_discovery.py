"""Discovery as the API server serves it, from the cluster's view: refreshed when old, one
refresh at a time however many ask."""

from __future__ import annotations

import asyncio
import time

import httpx

from control_plane.fake import FakeCluster
from tests.app.conftest import run_gateway


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_crowd_on_stale_discovery_shares_one_refresh():
    fake = FakeCluster()
    fetched: list[str] = []

    def counting_fetch(path: str, timeout: float = 30.0):
        fetched.append(path)
        time.sleep(0.02)  # a round trip: a refresh takes as long as a real one, so requests overlap it
        return fake.fetch(path, timeout)

    clock = _Clock()
    discovery = fake.discovery(clock=clock)
    discovery._fetch = counting_fetch  # the one way it reads the server, counted
    with run_gateway(fake, discovery=discovery) as gateway:
        url = gateway.url
        assert httpx.get(f"{url}/apis").status_code == 200
        fetched.clear()
        discovery.refresh()
        one_refresh = len(fetched)  # every document of the view
        assert one_refresh > 3
        clock.now += 3600  # every request now finds the view old

        async def crowd() -> list[int]:
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                answers = await asyncio.gather(*(client.get("/apis") for _ in range(200)))
                return [a.status_code for a in answers]

        fetched.clear()
        assert asyncio.run(crowd()) == [200] * 200
        # one refresh (and perhaps the heartbeat's /api); each request its own: 1,200
        assert len(fetched) <= one_refresh + 1, f"{len(fetched)} GETs; one refresh is {one_refresh}"
