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
