"""Field selectors: apimachinery's ``fields.ParseSelector`` plus dotted-path access.

A field selector is a comma-joined AND of ``path=value``, ``path==value`` and
``path!=value`` terms. In values, ``\\``, ``,`` and ``=`` are escaped with a
backslash; any other escape, or an unescaped ``,``/``=`` in a value, is an error.

Unlike the API server, which supports a few fields per kind, any dotted path
into the object may be used (``spec.containers.0.image``,
``metadata.labels.app.kubernetes.io/name``). A missing path compares as the
empty string; numbers and booleans compare as Go prints them. Where the API
server defines a field specially for a kind (a Node's ``spec.unschedulable`` is
``false`` when absent, an Event's ``source`` is ``source.component``), the
server's value is used, so the same query means the same thing on both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson

from informer_core.errors import SelectorError

__all__ = [
    "FieldSelector",
    "SelectorError",
    "Term",
    "escape_value",
    "everything",
    "field_value",
    "go_string",
    "parse_field_selector",
    "unescape_value",
]

_OPERATORS = ("!=", "==", "=")  # the order a term is scanned in, as apimachinery

# Fields the API server computes specially for a kind: path -> (real path, default).
_SERVER_FIELDS: dict[str, dict[str, tuple[str, str]]] = {
    "Pod": {"spec.hostNetwork": ("spec.hostNetwork", "false")},
    "Node": {"spec.unschedulable": ("spec.unschedulable", "false")},
    "Event": {
        "source": ("source.component", ""),
        "reportingComponent": ("reportingComponent", ""),
    },
    "ReplicaSet": {"status.replicas": ("status.replicas", "0")},
    "ReplicationController": {"status.replicas": ("status.replicas", "0")},
    "Job": {"status.successful": ("status.successful", "0")},
}


def escape_value(value: str) -> str:
    """Escape ``\\``, ``,`` and ``=`` for use in a field selector value."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def unescape_value(value: str) -> str:
    """Undo ``escape_value``.

    Raises:
        SelectorError: an unknown escape, a trailing backslash, or an unescaped
            ``,`` or ``=``.
    """
    if not any(c in value for c in "\\,="):
        return value
    out: list[str] = []
    escaped = False
    for ch in value:
        if escaped:
            if ch not in "\\,=":
                raise SelectorError(
                    f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            raise SelectorError(
                f"invalid field selector: unescaped character in value: {ch}")
        else:
            out.append(ch)
    if escaped:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not escaped."""
    terms, start, escaped = [], 0, False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """Split at the first operator; ``None`` if there is none."""
    for i in range(len(term)):
        for op in _OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op):]
    return None


def go_string(value: Any) -> str:
    """Render a JSON scalar as Go's ``fmt`` ``%v`` would (``true``, ``3``, ``1e+21``)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        return repr(value)
    return orjson.dumps(value).decode()


_MISSING = object()


def _lookup(node: Any, parts: list[str]) -> Any:
    """Follow ``parts`` into ``node``; a key may itself contain dots."""
    if not parts:
        return node
    if isinstance(node, Mapping):
        # Try the shortest key first, then join further parts ("app.kubernetes.io/name").
        for j in range(1, len(parts) + 1):
            key = ".".join(parts[:j])
            if key in node:
                found = _lookup(node[key], parts[j:])
                if found is not _MISSING:
                    return found
        return _MISSING
    if isinstance(node, list) and parts[0].isdigit():
        index = int(parts[0])
        if index < len(node):
            return _lookup(node[index], parts[1:])
    return _MISSING


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """Return the value at a dotted ``path`` as a field selector compares it."""
    default = ""
    special = _SERVER_FIELDS.get(obj.get("kind", "")) if isinstance(obj, Mapping) else None
    if special and path in special:
        path, default = special[path]
    found = _lookup(obj, path.split("."))
    if found is _MISSING or found is None:
        return default
    return go_string(found)


class Term:
    """One ``path op value`` term; ``op`` is ``=`` or ``!=`` (``==`` reads as ``=``)."""

    __slots__ = ("field", "negated", "value")

    def __init__(self, field: str, value: str, negated: bool = False) -> None:
        self.field = field
        self.value = value
        self.negated = negated

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Return whether ``obj`` satisfies this term."""
        return (field_value(obj, self.field) == self.value) != self.negated

    def __str__(self) -> str:
        return f"{self.field}{'!=' if self.negated else '='}{escape_value(self.value)}"

    def __repr__(self) -> str:
        return f"Term({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Term):
            return NotImplemented
        return (self.field, self.value, self.negated) == (other.field, other.value, other.negated)

    def __hash__(self) -> int:
        return hash((self.field, self.value, self.negated))


class FieldSelector:
    """An AND of field terms, in apimachinery's order (terms sorted as written)."""

    __slots__ = ("terms",)

    def __init__(self, terms: tuple[Term, ...] = ()) -> None:
        self.terms = terms

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Return whether ``obj`` satisfies every term."""
        for term in self.terms:
            if not term.matches(obj):
                return False
        return True

    def empty(self) -> bool:
        """Return whether the selector has no terms (it matches everything)."""
        return not self.terms

    def requires_exact(self, field: str) -> str | None:
        """Return the value ``field`` must equal, if some term says so (index hint)."""
        for term in self.terms:
            if term.field == field and not term.negated:
                return term.value
        return None

    def __str__(self) -> str:
        return ",".join(str(t) for t in self.terms)

    def __repr__(self) -> str:
        return f"parse_field_selector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldSelector):
            return NotImplemented
        return self.terms == other.terms

    def __hash__(self) -> int:
        return hash(self.terms)


_EVERYTHING = FieldSelector()


def everything() -> FieldSelector:
    """Return the field selector that matches every object."""
    return _EVERYTHING


def parse_field_selector(text: str) -> FieldSelector:
    """Parse a field selector.

    Raises:
        SelectorError: a term has no operator or no field, or a value is badly escaped.
    """
    if not isinstance(text, str):
        raise SelectorError(f"a field selector must be a string, not {type(text).__name__}")
    terms: list[Term] = []
    for part in sorted(_split_terms(text)) if text else []:
        if part == "":
            continue
        split = _split_term(part)
        if split is None:
            raise SelectorError(
                f"invalid field selector {text!r}: can't understand {part!r} "
                "(expected field=value, field==value or field!=value)")
        field, op, raw = split
        if not field.strip():
            raise SelectorError(f"invalid field selector {text!r}: {part!r} has no field name")
        try:
            value = unescape_value(raw)
        except SelectorError as exc:
            raise SelectorError(f"{exc} (in term {part!r} of {text!r})") from None
        terms.append(Term(field, value, negated=(op == "!=")))
    return FieldSelector(tuple(terms)) if terms else _EVERYTHING
