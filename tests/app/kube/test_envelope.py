"""List answers sent in slices are byte for byte the joined answer."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from app.kube.envelope import CHUNK, JOIN_BELOW, KeptBody, ListBody, list_length


def _send_all(body: ListBody) -> tuple[dict, list[dict]]:
    messages: list[dict] = []

    async def send(message: dict) -> None:
        messages.append(message)

    asyncio.run(body({"type": "http", "method": "GET"}, None, send))
    return messages[0], messages[1:]


@pytest.mark.parametrize("count, size", [(0, 10), (1, 10), (3, 100), (2000, 700), (5, JOIN_BELOW),
                                         (300, 1000)])
def test_sliced_body_equals_the_joined_one_and_its_length(count, size):
    head, tail = b'{"kind":"PodList","items":[', b"]}"
    items = [orjson.dumps({"n": i, "pad": "x" * size}) for i in range(count)]
    joined = head + b",".join(items) + tail
    assert list_length(head, items, tail) == len(joined)
    start, bodies = _send_all(ListBody(head, items, tail, {"ETag": '"e"'}))
    headers = dict(start["headers"])
    assert headers[b"content-length"] == str(len(joined)).encode()
    assert headers[b"etag"] == b'"e"' and headers[b"content-type"] == b"application/json"
    assert [k for k, _ in start["headers"]].count(b"content-length") == 1
    assert b"".join(m["body"] for m in bodies) == joined
    assert [m.get("more_body", False) for m in bodies][-1] is False
    assert all(m.get("more_body") for m in bodies[:-1])
    if len(joined) <= JOIN_BELOW:  # one write
        assert len(bodies) == 1
    else:  # large answers really go out in slices of bounded size
        assert len(bodies) > 2
        assert max(len(m["body"]) for m in bodies) <= CHUNK + size + 64
    assert len(orjson.loads(joined)["items"]) == count


def test_a_stored_object_is_sent_as_is_with_its_headers():
    raw = orjson.dumps({"kind": "Pod", "metadata": {"name": "x"}})
    start, bodies = _send_all(KeptBody((raw,), None))
    headers = dict(start["headers"])
    assert start["status"] == 200 and bodies == [{"type": "http.response.body", "body": raw}]
    assert headers == {b"content-type": b"application/json", b"cache-control": b"no-cache, private",
                       b"content-length": str(len(raw)).encode()}


@pytest.mark.parametrize("count, size", [(0, 10), (3, 100), (2000, 700), (300, 4000)])
def test_a_gzipped_body_is_compressed_slice_by_slice_and_inflates_to_the_joined_one(count, size):
    import gzip
    import random

    noise = random.Random(count)  # text that does not compress to nothing, so output flows
    head, tail = b'{"kind":"PodList","items":[', b"]}"
    items = [orjson.dumps({"n": i, "pad": noise.randbytes(size // 2).hex()}) for i in range(count)]
    joined = head + b",".join(items) + tail
    start, bodies = _send_all(ListBody(head, items, tail, {"ETag": '"e"'}, gzip=True))
    headers = dict(start["headers"])
    assert headers[b"content-encoding"] == b"gzip" and headers[b"vary"] == b"Accept-Encoding"
    assert b"content-length" not in headers, "chunked: its length is known only at the end"
    assert gzip.decompress(b"".join(m["body"] for m in bodies)) == joined
    assert [m.get("more_body", False) for m in bodies][-1] is False
    if len(joined) > JOIN_BELOW:  # compressed as it goes out, never joined whole
        assert len(bodies) > 2


@pytest.mark.parametrize("gzip", [False, True])
@pytest.mark.parametrize("count", [0, 1, 128, 129, 1000])
def test_items_made_a_slice_at_a_time_join_to_the_whole_answer(count, gzip):
    head, tail = b'{"kind":"PodList","items":[', b"]}"
    made: list[int] = []

    def make(sources):
        made.append(len(sources))
        return [orjson.dumps({"n": n}) for n in sources]

    from app.kube.envelope import MadeListBody

    start, bodies = _send_all(MadeListBody(head, list(range(count)), make, tail, {"ETag": '"e"'},
                                           gzip=gzip))
    joined = b"".join(m["body"] for m in bodies)
    if gzip and count > MadeListBody.PER_SLICE:
        assert dict(start["headers"])[b"content-encoding"] == b"gzip"
        import zlib

        joined = zlib.decompress(joined, 31)
    assert [i["n"] for i in orjson.loads(joined)["items"]] == list(range(count))
    headers = dict(start["headers"])
    if count <= MadeListBody.PER_SLICE:
        assert headers[b"content-length"] == str(len(joined)).encode() and len(bodies) == 1
    else:  # chunked; never more than a slice made at once
        assert b"content-length" not in headers
        assert max(made) <= MadeListBody.PER_SLICE and sum(made) == count
    assert bodies[-1].get("more_body", False) is False
