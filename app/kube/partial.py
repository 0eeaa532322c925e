"""Metadata-only answers: ``PartialObjectMetadata`` and its list, as the API server gives them.

client-go's metadata client and metadata informers (the garbage collector's and the quota
controller's, controller-runtime's ``OnlyMetadata``) ask for lists with
``Accept: application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,
application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json`` and for
gets and watches with ``as=PartialObjectMetadata``. The gateway speaks no protobuf, so the JSON
metadata form is chosen (``app.kube.request.negotiate``), and each object is answered as
``{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {...}}`` —
nothing of it but its metadata: every byte the client asked not to receive stays here, and
metadata informers get the shape they decode (whole objects broke them: client-go issue 882).

As the API server: the list form asked of one object, or the object form asked of a list, is
406 ``NotAcceptable`` in its words.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from app.kube.status import StatusError

__all__ = ["KIND", "LIST_KIND", "answer_type", "metadata_span", "partial", "wrong_form"]

KIND = "PartialObjectMetadata"
LIST_KIND = "PartialObjectMetadataList"
_HEADS: dict[str, bytes] = {}
_METADATA = b'"metadata":{'
_scan = json.JSONDecoder().raw_decode  # a JSON value from an offset, and where it ends


def _head(version: str) -> bytes:
    head = _HEADS.get(version)
    if head is None:
        head = _HEADS[version] = (b'{"kind":"' + KIND.encode() + b'","apiVersion":"meta.k8s.io/'
                                  + version.encode() + b'","metadata":')
    return head


def metadata_span(raw: bytes) -> tuple[int, int, dict] | None:
    """Where an object's ``metadata`` lies in its JSON bytes (start, end) and its value,
    decoding nothing else; ``None`` where that is not certain (then decode it whole).

    Certain means: the first ``"metadata":{`` preceded by no other object (the top level's
    ``apiVersion`` and ``kind`` come first, as the API server and the cache write them), in
    ASCII bytes (where character and byte offsets agree).
    """
    at = raw.find(_METADATA)
    if at <= 0 or b"{" in raw[1:at] or not raw.isascii():
        return None
    start = at + len(_METADATA) - 1
    try:
        meta, end = _scan(raw.decode("ascii"), start)
    except ValueError:
        return None
    return (start, end, meta) if isinstance(meta, dict) else None


def partial(raw: bytes, version: str = "v1") -> bytes:
    """The ``PartialObjectMetadata`` of an object's JSON (``meta.k8s.io/VERSION``): its
    ``metadata`` bytes as they are, in the metadata form's envelope (a Pod's metadata is a
    fifth of it: the rest is never decoded)."""
    span = metadata_span(raw)
    if span is not None:
        return _head(version) + raw[span[0]:span[1]] + b"}"
    meta = orjson.loads(raw).get("metadata")
    return _head(version) + orjson.dumps(meta if isinstance(meta, dict) else {}) + b"}"


def answer_type(resource: Any, accept: Any, listing: bool) -> tuple[str, str]:
    """(kind, apiVersion) of an answer of ``resource``, a list or one object (a watch's
    bookmark): the resource's own, or the metadata form's when ``accept`` asks for it."""
    if accept.kind == "meta":
        return (LIST_KIND if listing else KIND), f"meta.k8s.io/{accept.table_version}"
    return (resource.list_kind if listing else resource.kind), resource.api_version


def wrong_form(as_kind: str, listing: bool, resource: Any = None) -> StatusError | None:
    """The API server's 406 when ``as_kind`` is not the form of what is asked (a list or
    one object; ``resource``, when known, names its type); ``None`` when it is."""
    def typed(kind: str) -> str:
        return f" (*{resource.version}.{kind})" if resource is not None else ""

    if listing and as_kind == KIND:
        return StatusError(406, f"you requested {KIND}, but the requested object is a list"
                                + typed(getattr(resource, "list_kind", "")), "NotAcceptable")
    if not listing and as_kind == LIST_KIND:
        return StatusError(406, f"you requested {LIST_KIND}, but the requested object is not a "
                                f"list" + typed(getattr(resource, "kind", "")), "NotAcceptable")
    return None
