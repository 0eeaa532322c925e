"""Lists, watches and GETs over the Kubernetes REST API, with raw bytes and orjson.

``ApiListerWatcher`` lists and watches one resource through the ``kubernetes``
package's ``ApiClient`` configuration (server, TLS, client certificates, bearer
tokens and their refresh hooks), but reads raw bytes and parses them with
orjson: the generated model classes are 10-50x slower and are never used.
``RawClient`` is the same transport for single GETs (discovery).

Each list or watch call runs on a connection of its own, so that ``abort()`` —
called by a reflector that is told to stop — can shut the socket down from
another thread and wake a read blocked in the kernel at once.
"""

from __future__ import annotations

import http.client
import logging
import socket
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import urllib3
from urllib3.exceptions import HTTPError as Urllib3HTTPError

from informer_core.errors import WatchAbortedError
from informer_core.gcpause import paused_gc
from informer_core.listwatch import (
    ListOptions,
    ListPage,
    WatchEvent,
    WatchStream,
    status_error,
    tweaked,
)

__all__ = ["METADATA_API_VERSION", "METADATA_KIND", "ApiListerWatcher", "RawClient"]

log = logging.getLogger(__name__)

_CONNECT_TIMEOUT = 10.0
_LIST_READ_TIMEOUT = 120.0
_ONE_RETRY = urllib3.Retry(total=1, redirect=False, status=0, raise_on_status=False)
_WATCH_READ_MARGIN = 30.0  # seconds above the server-side watch timeout
_PAUSE_GC_ABOVE = 1 << 20  # bytes of list body worth pausing the cyclic GC for
METADATA_API_VERSION = "meta.k8s.io/v1"
METADATA_KIND = "PartialObjectMetadata"
# Only the metadata forms, no fallback to whole objects: an API server too old for them
# (before 1.15) answers 406 and the informer says so, rather than keeping what it was told not to.
_METADATA_LIST_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
_METADATA_ACCEPT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


class _Call:
    """One HTTP request on a dedicated connection; ``abort()`` works from any thread."""

    def __init__(self, pool: urllib3.HTTPConnectionPool) -> None:
        self._pool = pool
        self._lock = threading.Lock()  # guards _conn and _aborted
        self._conn: Any = None
        self._aborted = False

    def open(self, path: str, headers: dict[str, str], read_timeout: float) -> urllib3.HTTPResponse:
        pool = self._pool
        conn = pool._new_conn()  # a fresh connection with the pool's TLS settings
        if pool.proxy is not None:  # through the proxy, as the pool's own requests go
            if pool.scheme == "https":
                # what urlopen's proxy preparation does: CONNECT to the API server first
                conn.set_tunnel(pool.host, pool.port, headers=pool.proxy_headers,
                                scheme=pool.proxy.scheme or "http")
            else:
                path = f"http://{pool.host}:{pool.port}{path}"  # a plain proxy takes whole URLs
        with self._lock:
            if self._aborted:
                raise WatchAbortedError("request aborted before it started")
            self._conn = conn
        try:
            conn.timeout = _CONNECT_TIMEOUT
            conn.request("GET", path, headers=headers, preload_content=False,
                         decode_content=True)
            conn.timeout = read_timeout
            response = conn.getresponse()
        except (OSError, Urllib3HTTPError, http.client.HTTPException) as exc:
            conn.close()
            if self.aborted:
                raise WatchAbortedError("request aborted") from exc
            if isinstance(exc, http.client.HTTPException):  # e.g. a garbled status line
                raise ConnectionError(f"bad answer: {exc!r}") from exc
            raise
        except BaseException:
            conn.close()
            raise
        if self.aborted:
            response.release_conn()
            conn.close()
            raise WatchAbortedError("request aborted")
        return response

    @property
    def aborted(self) -> bool:
        return self._aborted

    def abort(self) -> None:
        with self._lock:
            self._aborted = True
            conn = self._conn
        sock = getattr(conn, "sock", None) if conn is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        conn = self._conn
        if conn is not None:
            conn.close()


class _HTTPWatchStream:
    """Watch events read line by line from a chunked HTTP response."""

    def __init__(self, call: _Call, response: urllib3.HTTPResponse,
                 item_func: Callable[[dict], Any], on_close: Callable[[_Call], None]) -> None:
        self._call = call
        self._response = response
        self._item_func = item_func
        self._on_close = on_close
        self._stopped = False
        self._events = self._read()

    def stop(self) -> None:
        """End the stream and free its connection.

        From another thread this aborts the read in progress, and the reading
        thread closes the connection as its loop ends. From the reading thread
        (or before any read) it closes the connection at once: a reader that
        stopped between events leaves its generator suspended, and if that
        generator is kept alive — by an exception's traceback, say — the socket
        would otherwise wait for the garbage collector.
        """
        self._stopped = True
        self._call.abort()
        try:
            self._events.close()  # runs the reader's cleanup if it is suspended
        except ValueError:
            return  # being read right now in another thread: the abort ends that read
        self._call.close()  # never started: a generator closed unstarted skips its cleanup
        self._on_close(self._call)

    def __iter__(self) -> Iterator[WatchEvent]:
        return self._events

    def _read(self) -> Iterator[WatchEvent]:
        buffer = b""
        try:
            for chunk in self._response.stream(65536):
                buffer += chunk
                while True:
                    newline = buffer.find(b"\n")
                    if newline < 0:
                        break
                    line, buffer = buffer[:newline], buffer[newline + 1:]
                    if line.strip():
                        yield self._event(line)
            if buffer.strip():
                yield self._event(buffer)
        except (OSError, Urllib3HTTPError) as exc:
            if self._stopped or self._call.aborted:
                return  # stopped on purpose: end quietly
            raise ConnectionError(f"watch stream broken: {exc}") from exc
        finally:
            self._call.close()
            self._on_close(self._call)

    def _event(self, line: bytes) -> WatchEvent:
        event = orjson.loads(line)
        kind = event.get("type", "")
        obj = event.get("object")
        if kind in ("ADDED", "MODIFIED", "DELETED") and isinstance(obj, dict):
            obj = self._item_func(obj)
        return WatchEvent(kind, obj)


class RawClient:
    """GET requests with an ``ApiClient``'s server, TLS settings and credentials, raw bytes back.

    Every request gets a connection of its own (see ``_Call``), so it can be
    aborted from another thread.
    """

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client
        self._config = api_client.configuration
        host = self._config.host.rstrip("/")
        self._base = urllib.parse.urlsplit(host).path  # a host may carry a path prefix
        self._pool = api_client.rest_client.pool_manager.connection_from_url(host)

    def new_call(self) -> _Call:
        return _Call(self._pool)

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "Accept-Encoding": "gzip"}
        user_agent = getattr(self.api_client, "user_agent", None)
        if user_agent:
            headers["User-Agent"] = user_agent
        for setting in self._config.auth_settings().values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[setting["key"]] = setting["value"]
        return headers

    def open(self, call: _Call, path: str, query: dict[str, str] | None,
             read_timeout: float, accept: str = "") -> urllib3.HTTPResponse:
        """Send a GET (as ``accept`` when given) and check the status; the caller reads the
        body and closes the call.

        Raises:
            APIStatusError: an error answer (``ResourceExpiredError`` for 410,
                ``NotFoundError`` for 404); the call is closed.
            ConnectionError: the request could not be sent or answered.
            WatchAbortedError: the call was aborted.
        """
        url = self._base + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = self.headers()
        if accept:
            headers["Accept"] = accept
        try:
            response = call.open(url, headers, read_timeout)
        except (OSError, Urllib3HTTPError) as exc:
            raise ConnectionError(f"GET {path}: {exc}") from exc
        if response.status < 400:
            return response
        try:
            body = response.read()
        except (OSError, Urllib3HTTPError):
            body = b""
        finally:
            call.close()
        try:
            status = orjson.loads(body)
        except orjson.JSONDecodeError:
            status = None
        raise status_error(response.status, status,
                           f"GET {path}: HTTP {response.status}: {body[:200]!r}")

    def get_json(self, path: str, read_timeout: float = 30.0) -> tuple[int, Any]:
        """GET ``path``; return (HTTP status, parsed body or ``None``). Never raises on 4xx/5xx.

        Short requests (discovery's thirty-odd documents) share the pool's
        kept-alive connections: a fresh TLS handshake for each made discovery
        the slowest part of starting an informer. Only lists and watches, which
        must be abortable, get connections of their own.

        Raises:
            ConnectionError: the request could not be sent or answered.
        """
        return self._short("GET", path, None, self.headers(), read_timeout)

    def get_raw(self, path: str, accept: str, if_none_match: str = "",
                read_timeout: float = 60.0) -> tuple[int, bytes, dict[str, str]]:
        """GET ``path`` as ``accept`` (a document too large or not JSON: OpenAPI); return
        (HTTP status, the body decompressed, the headers in lower case). ``if_none_match``:
        an ETag held (a 304 costs the server nothing). Never raises on 4xx/5xx.

        Raises:
            ConnectionError: the request could not be sent or answered.
        """
        headers = self.headers()
        headers["Accept"] = accept
        if if_none_match:
            headers["If-None-Match"] = if_none_match
        try:
            response = self._pool.urlopen(
                "GET", self._base + path, headers=headers, retries=_ONE_RETRY, redirect=False,
                preload_content=True, decode_content=True,
                timeout=urllib3.Timeout(connect=min(_CONNECT_TIMEOUT, read_timeout),
                                        read=read_timeout))
        except (OSError, Urllib3HTTPError, http.client.HTTPException) as exc:
            raise ConnectionError(f"GET {path}: {exc}") from exc
        return response.status, response.data, {k.lower(): v for k, v in response.headers.items()}

    def post_json(self, path: str, body: Any, read_timeout: float = 10.0) -> tuple[int, Any]:
        """POST ``body`` as JSON (a review); return (HTTP status, parsed body or ``None``).

        On the pool's kept-alive connections, as ``get_json``; never raises on 4xx/5xx.

        Raises:
            ConnectionError: the request could not be sent or answered.
        """
        headers = self.headers()
        headers["Content-Type"] = "application/json"
        return self._short("POST", path, orjson.dumps(body), headers, read_timeout)

    def _short(self, method: str, path: str, body: bytes | None, headers: dict[str, str],
               read_timeout: float) -> tuple[int, Any]:
        """One short request on the pool's connections: ``get_json`` and ``post_json``."""
        try:
            response = self._pool.urlopen(
                method, self._base + path, body=body, headers=headers,
                retries=_ONE_RETRY,  # a kept-alive connection the server just closed
                redirect=False, preload_content=True, decode_content=True,
                # a caller wanting an answer within a few seconds wants the connection (TLS
                # handshake included: a stopped server accepts, then says nothing) as soon
                timeout=urllib3.Timeout(connect=min(_CONNECT_TIMEOUT, read_timeout),
                                        read=read_timeout))
        except (OSError, Urllib3HTTPError, http.client.HTTPException) as exc:
            raise ConnectionError(f"{method} {path}: {exc}") from exc
        data = response.data
        try:
            return response.status, orjson.loads(data) if data else None
        except orjson.JSONDecodeError:
            return response.status, None


class ApiListerWatcher:
    """Lists and watches one resource over HTTP, parsing with orjson.

    Args:
        api_client: a ``kubernetes.client.ApiClient`` (its configuration is used).
        path: the collection path without a namespace, e.g. ``/api/v1/pods``
            or ``/apis/apps/v1/deployments``.
        namespaced: whether the resource is namespaced.
        namespace: restrict to one namespace (``None`` or ``""``: all).
        tweak_list_options: called on every ``ListOptions`` before sending
            (e.g. to add a server-side label or field selector).
        api_version, kind: set on items that arrive without them (list items do).
        metadata_only: ask for ``PartialObjectMetadata`` (lists, watches) as client-go's
            metadata informers do: the API server sends each object's ``metadata`` alone,
            so nothing else is transferred, parsed or kept. ``api_version`` and ``kind``
            are then ``meta.k8s.io/v1`` and ``PartialObjectMetadata``.
    """

    def __init__(self, api_client: Any, path: str, namespaced: bool = True,
                 namespace: str | None = None,
                 tweak_list_options: Callable[[ListOptions], None] | None = None,
                 api_version: str = "", kind: str = "", metadata_only: bool = False) -> None:
        self._client = RawClient(api_client)
        self._tweak = tweak_list_options
        self.metadata_only = metadata_only
        self.api_version = METADATA_API_VERSION if metadata_only else api_version
        self.kind = METADATA_KIND if metadata_only else kind
        self._accepts = (_METADATA_LIST_ACCEPT, _METADATA_ACCEPT) if metadata_only else ("", "")
        self.path = self._collection_path(path, namespaced, namespace)
        self._lock = threading.Lock()  # guards _calls
        self._calls: set[_Call] = set()

    @staticmethod
    def _collection_path(path: str, namespaced: bool, namespace: str | None) -> str:
        if not (namespaced and namespace):
            return path
        prefix, _, resource = path.rstrip("/").rpartition("/")
        return f"{prefix}/namespaces/{urllib.parse.quote(namespace, safe='')}/{resource}"

    # -- the protocol ---------------------------------------------------------

    def list(self, options: ListOptions) -> ListPage:
        """Fetch one page.

        Raises:
            ResourceExpiredError: 410 Gone (resource version or continue token too old).
            APIStatusError: any other error answer (``NotFoundError`` for 404).
            ConnectionError: the request could not be completed.
            WatchAbortedError: ``abort()`` was called meanwhile.
        """
        return self.parse_page(self.list_body(options))

    def list_body(self, options: ListOptions) -> bytes:
        """Fetch one page's body unparsed (the informer encodes it without building dicts).

        Raises:
            The same as ``list``.
        """
        options = tweaked(options, self._tweak)
        call = self._client.new_call()
        response = self._open(call, options.to_query(), _LIST_READ_TIMEOUT, self._accepts[0])
        try:
            return response.read()
        except (OSError, Urllib3HTTPError) as exc:
            if call.aborted:
                raise WatchAbortedError("list aborted") from exc
            raise ConnectionError(f"GET {self.path}: {exc}") from exc
        finally:
            call.close()
            self._forget(call)

    def parse_page(self, body: bytes) -> ListPage:
        """Parse a list body into a page of items, each passed through ``item``."""
        if len(body) > _PAUSE_GC_ABOVE:
            with paused_gc():
                doc = orjson.loads(body)
        else:
            doc = orjson.loads(body)
        del body
        meta = doc.get("metadata") or {}
        kind = self.kind or (doc.get("kind") or "").removesuffix("List")
        api_version = self.api_version or doc.get("apiVersion") or ""
        items = []
        for item in doc.get("items") or ():
            if "kind" not in item or "apiVersion" not in item:
                # First, as the API server writes them in watch events and gets.
                item = {"kind": item.get("kind", kind),
                        "apiVersion": item.get("apiVersion", api_version), **item}
            items.append(self.item(item))
        return ListPage(items, meta.get("resourceVersion", ""), meta.get("continue", "") or "")

    def watch(self, options: ListOptions) -> WatchStream:
        """Open a watch; iterate the returned stream for events.

        Raises:
            ResourceExpiredError, APIStatusError, ConnectionError: as ``list``.
        """
        options = tweaked(options, self._tweak)
        read_timeout = (options.timeout_seconds or 600) + _WATCH_READ_MARGIN
        call = self._client.new_call()
        response = self._open(call, options.to_query(watch=True), read_timeout, self._accepts[1])
        return _HTTPWatchStream(call, response, self.item, self._forget)

    # -- hooks ------------------------------------------------------------------

    def item(self, obj: dict) -> Any:
        """Turn one parsed item into what the caller stores (identity by default)."""
        return obj

    def abort(self) -> None:
        """Abort every call in flight (from any thread); they raise ``WatchAbortedError``."""
        with self._lock:
            calls = list(self._calls)
        for call in calls:
            call.abort()

    # -- internals --------------------------------------------------------------

    def _forget(self, call: _Call) -> None:
        with self._lock:
            self._calls.discard(call)

    def _open(self, call: _Call, query: dict[str, str], read_timeout: float,
              accept: str) -> urllib3.HTTPResponse:
        """Send the request, tracking the call so ``abort()`` can reach it."""
        with self._lock:
            self._calls.add(call)
        try:
            return self._client.open(call, self.path, query, read_timeout, accept)
        except BaseException:
            self._forget(call)
            raise
