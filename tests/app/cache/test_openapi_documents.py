"""The API server's OpenAPI documents, kept: fetched once however many ask, asked again only
under a new discovery view and then with If-None-Match, kept through an API server away."""

from __future__ import annotations

import asyncio
import gzip
import threading
import time

import pytest

from app.cache.openapi_documents import PROTOBUF, OpenAPIDocuments
from app.kube.status import StatusError


class Server:
    """A fake API server's OpenAPI: counts what it is asked, answers 304 to its ETag."""

    def __init__(self) -> None:
        self.body = b'{"swagger":"2.0","definitions":{}}' * 100
        self.asked: list[tuple[str, str, str]] = []
        self.down = False
        self._lock = threading.Lock()

    def fetch(self, path: str, accept: str, etag: str) -> tuple[int, bytes, dict]:
        with self._lock:
            self.asked.append((path, accept, etag))
        time.sleep(0.02)
        if self.down:
            raise ConnectionError("refused")
        if path.startswith("/openapi/v3"):
            return 404, b"{}", {}
        current = f'"{hash(self.body) & 0xffff:x}"'
        if etag == current:
            return 304, b"", {"etag": current}
        kind = "application/json" if accept == "application/json" else PROTOBUF
        return 200, self.body, {"etag": current, "content-type": kind}


def test_many_askers_share_one_fetch_and_a_view_keeps_the_document():
    server = Server()
    documents = OpenAPIDocuments(server.fetch)
    view = object()

    async def scenario():
        kept = await asyncio.gather(*(documents.document("/openapi/v2", "json", view)
                                      for _ in range(20)))
        assert len({id(k) for k in kept}) == 1 and len(server.asked) == 1
        assert gzip.decompress(kept[0].gzipped) == server.body
        assert kept[0].etag == server.fetch("/openapi/v2", "application/json", "")[2]["etag"]
        server.asked.clear()
        again = await documents.document("/openapi/v2", "json", view)
        assert again is kept[0] and not server.asked, "the same view: nothing asked"
        await documents.document("/openapi/v2", "json", object())  # a discovery refresh
        assert server.asked[-1][2] == kept[0].etag, "asked again with If-None-Match"
        server.body += b" "  # a CRD changed
        changed = await documents.document("/openapi/v2", "json", object())
        assert changed.body == server.body and changed.etag != kept[0].etag
        proto = await documents.document("/openapi/v2", "protobuf", view)
        assert server.asked[-1][1] == PROTOBUF and proto.media_type == PROTOBUF

    asyncio.run(scenario())


def test_what_was_had_is_served_while_the_api_server_is_away_and_404_is_its_404():
    server = Server()
    documents = OpenAPIDocuments(server.fetch)

    async def scenario():
        kept = await documents.document("/openapi/v2", "json", object())
        server.down = True
        assert await documents.document("/openapi/v2", "json", object()) is kept
        with pytest.raises(StatusError) as never_had:
            await documents.document("/openapi/v2", "protobuf", object())
        assert never_had.value.code == 503
        server.down = False
        with pytest.raises(StatusError) as missing:
            await documents.document("/openapi/v3", "json", object())
        assert missing.value.code == 404
        with pytest.raises(StatusError) as no_client:
            await OpenAPIDocuments(None).document("/openapi/v2", "json", object())
        assert no_client.value.code == 404

    asyncio.run(scenario())


class V3Server(Server):
    """An API server with OpenAPI v3: a root naming two documents."""

    ROOT = (b'{"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=A"}, '
            b'"apis/apps/v1": {"serverRelativeURL": "/openapi/v3/apis/apps/v1?hash=B"}}}')

    def fetch(self, path: str, accept: str, etag: str) -> tuple[int, bytes, dict]:
        with self._lock:
            self.asked.append((path, accept, etag))
        if path == "/openapi/v3":
            return 200, self.ROOT, {"content-type": "application/json"}
        if path in ("/openapi/v3/api/v1", "/openapi/v3/apis/apps/v1"):
            return 200, b'{"openapi": "3.0.0", "x": "' + path.encode() + b'"}' * 1000, {}
        return 404, b"{}", {}


def test_what_is_kept_is_bounded_by_what_the_api_server_serves_never_by_what_is_asked():
    """Keyed by the whole query, 100 distinct queries once kept 100 documents (+219 MB) and a
    lock per distinct path, 404s included: now a query is no key, a path the v3 root does not
    name is 404 without a fetch, and no fetch leaves state behind."""
    async def scenario() -> None:
        server = V3Server()
        documents = OpenAPIDocuments(server.fetch)
        view = object()
        for i in range(100):
            # what openapi_v3 passes on for /openapi/v3/apis/apps/v1?hash=...&junk=i: the path
            kept = await documents.document("/openapi/v3/apis/apps/v1", "json", view)
            assert b"apis/apps/v1" in kept.body
            with pytest.raises(StatusError) as unknown:
                await documents.document(f"/openapi/v3/apis/made-up-{i}/v1", "json", view)
            assert unknown.value.code == 404
        assert len(documents._kept) == 2, "the root and the one document"
        assert not documents._fetching, "no state per miss, nor per fetch once it ended"
        asked = [p for p, _, _ in server.asked]
        assert asked == ["/openapi/v3", "/openapi/v3/apis/apps/v1"], asked

    asyncio.run(scenario())
