"""What every merged read shares: the cluster annotation, and version tokens.

Every object of a merged read carries ``kube-cache-gateway.io/cluster: NAME``, set on a
copy (``tagged``): what is cached is shared by every reader and never changed.

A merged list's ``metadata.resourceVersion``, a merged watch's object versions and a
merged event stream's ids name where each cluster stands (``kcg1.`` + base64url JSON of
``{cluster: version}``). Never an integer, so no client mistakes one for a single
cluster's version (a merged resourceVersion that looked like one broke clients of
other multi-cluster servers); opaque, as the API server's are, so clients only echo it.

A list's or a watch's token holds resourceVersions (etcd's, so any process or replica
resumes from them); an event stream's holds each cluster's event id, which may be a
version or an id of one process's hub (``app.cache.hub``), resumed where it can be and
answered with ``RESET`` where not.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import orjson

from app.kube.partial import metadata_span
from app.kube.status import bad_request

__all__ = ["CLUSTER_ANNOTATION", "TOKEN_PREFIX", "decode_versions", "encode_versions",
           "most_token_bytes", "tagged",
           "tagged_dict"]

CLUSTER_ANNOTATION = "kube-cache-gateway.io/cluster"

TOKEN_PREFIX = "kcg1."
_MAX_ID = 96  # characters of one cluster's id in a token: hub ids are far shorter


def tagged(raw: bytes, cluster: str, version: str | None = None) -> bytes:
    """``raw`` (an object's JSON) with the cluster annotation (and ``version`` as its
    ``metadata.resourceVersion``, when given), on a copy.

    Only ``metadata`` is decoded and encoded again, spliced between the bytes before and
    after it: a third of the cost of the whole object's (a Pod's metadata is a fifth of it),
    which a merged list of 30,000 objects pays 30,000 times. The splice is taken only where
    it is certain (``app.kube.partial.metadata_span``); anything else is decoded whole.
    """
    span = metadata_span(raw)
    if span is not None:
        start, end, meta = span
        _tag(meta, cluster, version)
        return b"".join((raw[:start], orjson.dumps(meta), raw[end:]))
    return orjson.dumps(tagged_dict(raw, cluster, version))


def tagged_dict(raw: bytes, cluster: str, version: str | None = None) -> dict[str, Any]:
    """``raw`` decoded, with the cluster annotation (and ``version``): for Table rows."""
    obj = orjson.loads(raw)
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    _tag(meta, cluster, version)
    return obj


def _tag(meta: dict[str, Any], cluster: str, version: str | None) -> None:
    annotations = meta.get("annotations")
    if not isinstance(annotations, dict):
        annotations = meta["annotations"] = {}
    annotations[CLUSTER_ANNOTATION] = cluster
    if version is not None:
        meta["resourceVersion"] = version


def encode_versions(versions: dict[str, str]) -> str:
    """The token naming each cluster's version (or event id)."""
    return TOKEN_PREFIX + base64.urlsafe_b64encode(
        orjson.dumps(versions, option=orjson.OPT_SORT_KEYS)).decode().rstrip("=")


def most_token_bytes(clusters: int) -> int:
    """The longest token ``clusters`` clusters can make: each entry a name of at most 63
    characters (a DNS label) and an id of at most ``_MAX_ID``, JSON-quoted, base64url."""
    body = 2 + clusters * (63 + _MAX_ID + 6)
    return len(TOKEN_PREFIX) + (body + 2) // 3 * 4


def decode_versions(token: str, ids: bool = False, clusters: int | None = None) -> dict[str, str]:
    """Each cluster's version a token names (``ids``: event ids, which need not be versions).

    ``clusters``: how many clusters the gateway has configured. A token naming more, or
    longer than they could make, was not issued here: it is refused before it is decoded
    (a forged token naming thousands of clusters, kept and echoed on every event, once
    took a stream over 601 objects from 81 to 777 MB).

    Raises:
        StatusError: 400 for a token this gateway did not issue.
    """
    if clusters is not None and len(token) > most_token_bytes(clusters):
        raise bad_request(f"invalid resourceVersion: longer than a token of this gateway's "
                          f"{clusters} clusters can be")
    try:
        if not token.startswith(TOKEN_PREFIX):
            raise ValueError
        body = token[len(TOKEN_PREFIX):]
        versions = orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        if not isinstance(versions, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and 0 < len(v) <= _MAX_ID
                and (ids or v.isdigit()) for k, v in versions.items()):
            raise ValueError
    except (ValueError, binascii.Error, orjson.JSONDecodeError):
        raise bad_request(f"invalid resourceVersion {token[:64]!r}: under /clusters/*/ a version "
                          f"is the token of a merged list or watch") from None
    if clusters is not None and len(versions) > clusters:
        raise bad_request(f"invalid resourceVersion: it names {len(versions)} clusters, and this "
                          f"gateway has {clusters}")
    return versions
