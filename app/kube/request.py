"""Parse a resource request: its path, its query, and what it accepts.

Paths, ``core`` standing for the legacy group:

    /api/v1/{resource}[/{name}]                         and under namespaces/{ns}/
    /apis/{group}/{version}/{resource}[/{name}]         and under namespaces/{ns}/
    /{group}/{version}/{resource}[/{name}]              (the short form)

Every problem becomes a ``StatusError`` with a 4xx code that says what was wrong.
"""

from __future__ import annotations

import base64
import binascii
import functools
import urllib.parse
from dataclasses import dataclass, field

import orjson

from app.query.fieldpath import FieldPath
from app.query.filters import Filter, FilterError, parse_filter
from app.query.projection import ProjectionError, parse_fields
from app.query.ordering import Ordering, SortError, parse_sort
from app.kube.status import StatusError, bad_request, not_acceptable, not_found
from app.query.summary import SummaryError, parse_summary
from informer_core.errors import SelectorError
from informer_core.fields import FieldSelector, parse_field_selector
from informer_core.labels import Selector, parse_selector, selector_from_set
from informer_core.validation import is_dns1123_label, is_valid_object_name

__all__ = ["CACHED_UP_TO", "Accept", "Query", "ResourcePath", "check_names", "continued_at", "decode_continue", "encode_continue",
           "negotiate", "parse_path", "parse_query"]

_GO_TRUE = ("1", "t", "T", "true", "True", "TRUE")
_GO_FALSE = ("0", "f", "F", "false", "False", "FALSE")


@dataclass(frozen=True)
class ResourcePath:
    """What a path names: a collection or an object of one resource."""

    group: str
    version: str
    resource: str
    namespace: str | None = None  # from /namespaces/{ns}/...
    name: str | None = None
    subresource: str | None = None


def _unknown_path(path: str) -> StatusError:
    return not_found(f"the server could not find the requested resource ({path})")


# What the parse caches may keep: no key longer than this (hostile variety of long paths,
# names and headers must not fill memory). A path of the longest names Kubernetes allows
# (a 253-character group and object name, 63-character others) is shorter.
CACHED_UP_TO = 2048
_LONGEST_SEGMENT = 253  # a DNS subdomain: the longest group, or object name, there can be


def parse_path(path: str) -> ResourcePath:
    """Split a request path into group, version, resource, namespace and name.

    Clients ask for the same paths again and again: answers are remembered
    (``ResourcePath`` is immutable), for paths up to ``CACHED_UP_TO``. A longer path
    is parsed without being kept; one with a segment no group, version, resource,
    namespace or name can be is refused before anything is parsed or kept.

    Raises:
        StatusError: 404 when the path cannot name a resource.
    """
    if len(path) <= CACHED_UP_TO:
        return _parse_path_cached(path)
    if any(len(segment) > _LONGEST_SEGMENT for segment in path.split("/")):
        raise _unknown_path(path[:200] + "...")
    return _parse_path(path)


@functools.lru_cache(maxsize=4096)
def _parse_path_cached(path: str) -> ResourcePath:
    return _parse_path(path)


def _parse_path(path: str) -> ResourcePath:
    parts = path.rstrip("/").split("/")[1:]  # a trailing slash means nothing
    if not parts or "" in parts:
        # an empty segment, as in //api/v1/pods or .../default//pods: the API server's 404 -
        # save an empty namespace (namespaces//pods), which it reads as all namespaces
        at = parts.index("") if parts else -1
        if at < 1 or parts[at - 1] != "namespaces" or "" in parts[at + 1:]:
            raise _unknown_path(path)
        parts = parts[:at - 1] + parts[at + 1:]
    if parts[0] == "api":
        if len(parts) < 3:
            raise _unknown_path(path)
        group, version, rest = "", parts[1], parts[2:]
    elif parts[0] == "apis":
        if len(parts) < 4:
            raise _unknown_path(path)
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        if len(parts) < 3:
            raise _unknown_path(path)
        group = "" if parts[0] == "core" else parts[0]
        version, rest = parts[1], parts[2:]
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    if len(rest) > 3:
        raise _unknown_path(path)
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else None
    return ResourcePath(group, version, resource, namespace, name, subresource)


def check_names(target: ResourcePath) -> None:
    """Validate the namespace and object name in a path.

    Raises:
        StatusError: 400 for a name no object can have.
    """
    namespace, name = target.namespace, target.name
    if len(namespace or "") + len(name or "") <= CACHED_UP_TO:
        problem = _name_problem_cached(namespace, name)
    else:
        problem = _name_problem(namespace, name)
    if problem is not None:
        raise bad_request(problem[:1024])


@functools.lru_cache(maxsize=4096)
def _name_problem_cached(namespace: str | None, name: str | None) -> str | None:
    return _name_problem(namespace, name)


def _name_problem(namespace: str | None, name: str | None) -> str | None:
    if namespace is not None:
        problems = is_dns1123_label(namespace)
        if problems:
            return f"invalid namespace {namespace!r}: {'; '.join(problems)}"
    if name is not None:
        problems = is_valid_object_name(name)
        if problems:
            return f"invalid name {name!r}: {'; '.join(problems)}"
    return None


@dataclass(frozen=True)
class Query:
    """The query parameters the gateway understands, parsed and validated."""

    labels: Selector
    fields: FieldSelector
    limit: int = 0
    continue_key: str | None = None
    watch: bool = False
    resource_version: str = ""
    resource_version_match: str = ""  # "", NotOlderThan or Exact (app.cache.requested_version)
    send_initial_events: bool | None = None  # watch-list (KEP-3157): None when not given
    timeout_seconds: int | None = None
    allow_bookmarks: bool = False
    include_object: str = "Metadata"
    label_text: str = ""
    field_text: str = ""
    # for dashboards (docs/queries.md)
    filters: tuple[Filter, ...] = ()
    ordering: Ordering | None = None
    fields_paths: tuple[FieldPath, ...] | None = None
    fields_text: str = ""
    summary: tuple[FieldPath, ...] | None = None
    view_text: str = ""  # filters, sortBy, fields and summary as written: part of a query's identity
    raw: tuple[tuple[str, str], ...] = field(default=(), compare=False)


def _go_bool(name: str, value: str) -> bool:
    if value in _GO_TRUE:
        return True
    if value in _GO_FALSE:
        return False
    raise bad_request(f"invalid value {value!r} for {name}: not a boolean "
                      "(use true, false, 1, 0, t or f)")


def _non_negative_int(name: str, value: str) -> int:
    try:
        number = int(value, 10)
    except ValueError:
        raise bad_request(f"invalid value {value!r} for {name}: not an integer") from None
    if number < 0:
        raise bad_request(f"invalid value {value!r} for {name}: must not be negative")
    if number > _INT64_MAX:
        raise bad_request(f"invalid value {value[:32]!r} for {name}: larger than {_INT64_MAX}")
    return number


_INT64_MAX = 2**63 - 1  # the API server's parameters are int64


def encode_continue(key: str, query_fingerprint: str, place: tuple | None = None,
                    version: int | str | None = None) -> str:
    """Make a continue token: resume after ``key`` (at ``place`` in a sorted list) for the
    same query; ``version``: the past version the first page was read at (every page is) —
    a merged list's names one per cluster (its version token)."""
    doc: dict = {"v": 1, "k": key, "q": query_fingerprint}
    if place is not None:
        doc["p"] = place
    if version is not None:
        doc["r"] = version
    return base64.urlsafe_b64encode(orjson.dumps(doc)).decode()


def continued_at(token: str) -> int | str | None:
    """The past version a continue token's pages are read at — a merged list's version
    token, naming one per cluster (``None``: the present, or not a token of ours —
    ``decode_continue`` says so)."""
    try:
        doc = orjson.loads(base64.urlsafe_b64decode(token.encode() + b"=" * (-len(token) % 4)))
    except (ValueError, binascii.Error, orjson.JSONDecodeError):
        return None
    version = doc.get("r") if isinstance(doc, dict) else None
    if type(version) is int and 0 < version <= _INT64_MAX:
        return version
    return version if isinstance(version, str) and 0 < len(version) <= 4096 else None


def decode_continue(token: str, query_fingerprint: str) -> tuple[str, list | None]:
    """Return the key a continue token resumes after, and its sort place if any.

    Raises:
        StatusError: 400 for a token that is not ours or belongs to another query.
    """
    try:
        doc = orjson.loads(base64.urlsafe_b64decode(token.encode() + b"=" * (-len(token) % 4)))
        if not isinstance(doc, dict) or doc.get("v") != 1 or not isinstance(doc.get("k"), str):
            raise ValueError
        place = doc.get("p")
        if place is not None and not isinstance(place, list):
            raise ValueError
    except (ValueError, binascii.Error, orjson.JSONDecodeError):
        raise bad_request(f"invalid continue token {token[:64]!r}: it was not issued by "
                          "this gateway; start the list again without 'continue'") from None
    if doc.get("q") != query_fingerprint:
        raise bad_request("the continue token belongs to a different query "
                          "(selectors must stay the same while paging)")
    return doc["k"], place


def parse_query(query_string: bytes | str, max_length: int) -> Query:
    """Parse and validate the query string.

    Dashboards repeat the same few queries, so valid ones are remembered
    (``Query`` is immutable): parsing a selector cost a tenth of a cached
    list's time.

    Raises:
        StatusError: 414 when too long, 400 for any invalid value.
    """
    if isinstance(query_string, bytes):
        query_string = query_string.decode("latin-1")
    if len(query_string) > max_length:
        raise StatusError(414, f"the query string is {len(query_string)} bytes; at most "
                               f"{max_length} are accepted", "RequestURITooLong")
    if len(query_string) > CACHED_UP_TO:
        return _parse_query.__wrapped__(query_string)  # parsed, not kept
    return _parse_query(query_string)


@functools.lru_cache(maxsize=512)
def _parse_query(query_string: str) -> Query:
    pairs = urllib.parse.parse_qsl(query_string, keep_blank_values=True)
    values: dict[str, str] = {}
    label_set: dict[str, str] = {}
    for key, value in pairs:
        if key.startswith("labels[") and key.endswith("]"):
            label_set[key[7:-1]] = value
        else:
            values[key] = value
    label_text = values.get("labelSelector", "")
    try:
        labels = parse_selector(label_text)
        if label_set:
            extra = selector_from_set(label_set)
            labels = Selector(labels.requirements + extra.requirements)
    except SelectorError as exc:
        raise bad_request(f"invalid labelSelector: {exc}") from None
    field_text = values.get("fieldSelector", "")
    try:
        fields = parse_field_selector(field_text)
    except SelectorError as exc:
        raise bad_request(f"invalid fieldSelector: {exc}") from None
    limit = _non_negative_int("limit", values["limit"]) if values.get("limit", "") != "" else 0
    watch = _go_bool("watch", values["watch"]) if "watch" in values else False
    timeout = None
    if values.get("timeoutSeconds", "") != "":
        timeout = _non_negative_int("timeoutSeconds", values["timeoutSeconds"])
    bookmarks = (_go_bool("allowWatchBookmarks", values["allowWatchBookmarks"])
                 if "allowWatchBookmarks" in values else False)
    rv = values.get("resourceVersion", "")
    if rv and not rv.isdigit():
        raise bad_request(f"invalid resourceVersion {rv!r}: not a resource version this "
                          "gateway issued")
    include = values.get("includeObject", "") or "Metadata"
    if include not in ("None", "Metadata", "Object"):
        raise bad_request(f"invalid includeObject {include!r}: use None, Metadata or Object")
    filters, ordering, fields_paths, summary, view_text = _dashboard(pairs, values)
    return Query(labels=labels, fields=fields, limit=limit,
                 continue_key=values.get("continue") or None, watch=watch,
                 resource_version=rv,
                 resource_version_match=values.get("resourceVersionMatch", ""),
                 send_initial_events=(_go_bool("sendInitialEvents", values["sendInitialEvents"])
                                      if "sendInitialEvents" in values else None),
                 timeout_seconds=timeout, allow_bookmarks=bookmarks,
                 include_object=include, label_text=str(labels), field_text=str(fields),
                 filters=filters, ordering=ordering, fields_paths=fields_paths,
                 fields_text=values.get("fields", ""), summary=summary, view_text=view_text,
                 raw=tuple(pairs))


_MAX_FILTERS = 32


def _dashboard(pairs: list[tuple[str, str]], values: dict[str, str]) -> tuple:
    """``filter`` (repeated), ``sortBy``, ``fields`` and ``summary``, parsed."""
    texts = [v for k, v in pairs if k == "filter" and v.strip(" ")]
    if len(texts) > _MAX_FILTERS:
        raise bad_request(f"at most {_MAX_FILTERS} filter parameters are accepted")
    try:
        filters = tuple(parse_filter(t) for t in texts)
        ordering = parse_sort(values["sortBy"]) if values.get("sortBy") else None
        fields_paths = parse_fields(values["fields"]) if values.get("fields") else None
        summary = parse_summary(values["summary"]) if values.get("summary") else None
    except (FilterError, SortError, ProjectionError, SummaryError) as exc:
        raise bad_request(f"invalid {_PARAMETER[type(exc)]}: {exc}") from None
    view_text = ""
    if texts or ordering is not None or fields_paths is not None or summary is not None:
        view_text = orjson.dumps([texts, values.get("sortBy"), values.get("fields"),
                                  values.get("summary")]).decode()
    return filters, ordering, fields_paths, summary, view_text


_PARAMETER = {FilterError: "filter", SortError: "sortBy", ProjectionError: "fields",
              SummaryError: "summary"}


@dataclass(frozen=True)
class Accept:
    """The chosen representation: ``json``, ``table`` (with its API version), ``meta``
    (``PartialObjectMetadata`` or its list, ``as_kind``, at ``table_version``: ``app.kube.partial``)
    or ``sse``."""

    kind: str
    table_version: str = "v1"
    as_kind: str = ""


def negotiate(header: str | None, allow_sse: bool) -> Accept:
    """Choose a representation from an ``Accept`` header, in the client's order (remembered
    for headers up to ``CACHED_UP_TO``).

    Raises:
        StatusError: 406 when nothing acceptable is offered.
    """
    if header is not None and len(header) > CACHED_UP_TO:
        return _negotiate(header, allow_sse)
    return _negotiate_cached(header, allow_sse)


@functools.lru_cache(maxsize=256)
def _negotiate_cached(header: str | None, allow_sse: bool) -> Accept:
    return _negotiate(header, allow_sse)


def _negotiate(header: str | None, allow_sse: bool) -> Accept:
    if not header or not header.strip():
        return Accept("json")
    offers: list[tuple[float, int, Accept | None]] = []
    for position, item in enumerate(header.split(",")):
        media, *params = [p.strip() for p in item.split(";")]
        media = media.lower()
        options = {}
        for param in params:
            key, _, value = param.partition("=")
            options[key.strip().lower()] = value.strip()
        try:
            q = float(options.get("q", "1"))
        except ValueError:
            q = 1.0
        if q <= 0:
            continue
        chosen: Accept | None = None
        if media == "text/event-stream":
            chosen = Accept("sse") if allow_sse else None
        elif media in ("application/json", "application/*", "*/*"):
            as_ = options.get("as", "")
            if not as_:
                chosen = Accept("json")
            elif as_ == "Table" and options.get("g") == "meta.k8s.io" and \
                    options.get("v") in ("v1", "v1beta1"):
                chosen = Accept("table", options["v"])
            elif as_ in ("PartialObjectMetadata", "PartialObjectMetadataList") and \
                    options.get("g") == "meta.k8s.io" and options.get("v") in ("v1", "v1beta1"):
                chosen = Accept("meta", options["v"], as_)
        offers.append((q, position, chosen))
    offers.sort(key=lambda o: (-o[0], o[1]))
    for _, _, chosen in offers:
        if chosen is not None:
            return chosen
    raise not_acceptable(header)
