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

import orjson

from app.kube.status import bad_request

__all__ = ["CLUSTER_ANNOTATION", "TOKEN_PREFIX", "decode_versions", "encode_versions", "tagged"]

CLUSTER_ANNOTATION = "kube-cache-gateway.io/cluster"

TOKEN_PREFIX = "kcg1."
_MAX_ID = 96  # characters of one cluster's id in a token: hub ids are far shorter


def tagged(raw: bytes, cluster: str, version: str | None = None) -> bytes:
    """``raw`` (an object's JSON) with the cluster annotation (and ``version`` as its
    ``metadata.resourceVersion``, when given), on a copy."""
    obj = orjson.loads(raw)
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    annotations = meta.get("annotations")
    if not isinstance(annotations, dict):
        annotations = meta["annotations"] = {}
    annotations[CLUSTER_ANNOTATION] = cluster
    if version is not None:
        meta["resourceVersion"] = version
    return orjson.dumps(obj)


def encode_versions(versions: dict[str, str]) -> str:
    """The token naming each cluster's version (or event id)."""
    return TOKEN_PREFIX + base64.urlsafe_b64encode(
        orjson.dumps(versions, option=orjson.OPT_SORT_KEYS)).decode().rstrip("=")


def decode_versions(token: str, ids: bool = False) -> dict[str, str]:
    """Each cluster's version a token names (``ids``: event ids, which need not be versions).

    Raises:
        StatusError: 400 for a token this gateway did not issue.
    """
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
    return versions
