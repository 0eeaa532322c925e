"""A cluster's OpenAPI documents, as its API server serves them, kept with its discovery.

``kubectl explain`` reads the API server's schemas: ``/openapi/v3`` first (a root that
names one document per group version, by a hash), then ``/openapi/v2`` (one document,
JSON or protobuf). They are megabytes, so the gateway keeps each one it was asked for
(its bytes, compressed once, the API server's ``ETag``) and serves it from memory; it
asks the API server again only after a discovery refresh (a CRD added or changed shows
there), and then with ``If-None-Match``, which the API server answers with a bare 304
while nothing changed. Concurrent askers share one fetch.

The API server's answer is the gateway's: a 404 for an OpenAPI version it does not serve
(v3 before 1.27, unless enabled), its content types as they are.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from app.bridge import run_blocking
from app.kube.status import StatusError, not_found

__all__ = ["OpenAPIDocuments", "Kept", "PROTOBUF"]

log = logging.getLogger(__name__)

PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
_ACCEPT = {"json": "application/json", "protobuf": PROTOBUF}

# (path, accept, If-None-Match) -> (status, body, lower-cased headers); blocking
Fetch = Callable[[str, str, str], tuple[int, bytes, dict[str, str]]]


@dataclass
class Kept:
    """One document as served: its bytes, compressed once, and how it is named."""

    body: bytes
    gzipped: bytes
    etag: str
    media_type: str
    upstream_etag: str
    view: Any  # the discovery view it was checked against last
    listed: frozenset[str] | None = None  # the v3 root's: the document paths it names


def _listed(root: Kept) -> frozenset[str]:
    """The paths of the documents the v3 root names (read once per root kept)."""
    if root.listed is None:
        try:
            paths = orjson.loads(root.body).get("paths")
        except (orjson.JSONDecodeError, AttributeError):
            paths = None
        root.listed = frozenset("/openapi/v3/" + p.lstrip("/") for p in paths or ()
                                if isinstance(p, str)) if isinstance(paths, dict) else frozenset()
    return root.listed


class OpenAPIDocuments:
    """One cluster's OpenAPI documents, fetched when first asked and kept (see the module)."""

    def __init__(self, fetch: Fetch | None) -> None:
        self._fetch = fetch
        self._kept: dict[tuple[str, str], Kept] = {}
        # fetches under way, shared by their askers; an entry lives as long as its fetch
        self._fetching: dict[tuple[str, str], asyncio.Future] = {}

    async def document(self, path: str, kind: str, view: Any) -> Kept:
        """The document at ``path`` (no query: a ``hash`` only names a version of the same
        document, and the current one is served) as ``kind`` (``json``, ``protobuf``),
        not older than the discovery ``view`` it is asked under.

        What is kept is bounded by what the API server serves, never by what callers ask:
        a ``/openapi/v3/...`` document is fetched only when the v3 root names it (anything
        else is 404 with nothing kept), so the documents are at most one per group version,
        and a fetch's shared state ends with it.

        Raises:
            StatusError: 404 where the API server serves no such document; 503 when it
                cannot be asked and nothing is kept.
        """
        key = (path, kind)
        kept = self._kept.get(key)
        if kept is not None and kept.view is view:
            return kept
        if path.startswith("/openapi/v3/"):
            root = await self.document("/openapi/v3", "json", view)
            if path not in _listed(root):
                raise not_found(f"the API server serves no {path}")
        fetching = self._fetching.get(key)
        if fetching is None:
            fetching = self._fetching[key] = asyncio.ensure_future(self._refresh(path, kind, view))
            fetching.add_done_callback(lambda _, key=key: self._fetching.pop(key, None))
        return await asyncio.shield(fetching)

    async def _refresh(self, path: str, kind: str, view: Any) -> Kept:
        """Fetch ``path`` (with ``If-None-Match`` when a copy is kept) and keep the answer;
        one at a time per document (``document`` shares it)."""
        key = (path, kind)
        kept = self._kept.get(key)
        if self._fetch is None:
            raise not_found(f"the API server's OpenAPI ({path}) is not known to this gateway")
        try:
            status, body, headers = await run_blocking(
                self._fetch, path, _ACCEPT[kind], kept.upstream_etag if kept else "")
        except ConnectionError as exc:
            if kept is not None:
                return kept  # what was had, while the API server does not answer
            log.warning("the API server's OpenAPI %s cannot be read: %s", path, exc)
            raise StatusError(503, "the API server's OpenAPI cannot be read",
                              "ServiceUnavailable", headers={"Retry-After": "5"}) from None
        if status == 304 and kept is not None:
            kept.view = view
            return kept
        if status == 404:
            self._kept.pop(key, None)
            raise not_found(f"the API server serves no {path}")
        if status != 200:
            if kept is not None:
                return kept
            raise StatusError(503, f"the API server answered {status} for {path}",
                              "ServiceUnavailable", headers={"Retry-After": "5"})
        gzipped = await run_blocking(gzip.compress, body, 6)
        upstream = headers.get("etag", "")
        etag = upstream or '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'
        if kind == "protobuf" and upstream:
            etag = upstream  # the API server's ETag names its protobuf already
        kept = self._kept[key] = Kept(body, gzipped, etag,
                                      headers.get("content-type", _ACCEPT[kind]), upstream, view)
        return kept

    def forget(self) -> None:
        """Drop every document (the cluster is going away)."""
        self._kept.clear()
