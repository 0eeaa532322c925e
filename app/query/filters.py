"""``filter=PATH OP VALUE``: conditions on any field, for dashboards.

Label and field selectors only test what the API server indexes or knows by
name; a dashboard's search box asks for anything (``status.phase!=Running``,
``spec.containers.*.image~nginx``, ``status.containerStatuses.0.restartCount>3``).
Operators: ``=`` (``==`` too), ``!=``, ``~`` (case-insensitive substring),
``!~``, ``<``, ``>`` (numbers, quantities and timestamps by value, other text
as text; a missing value is neither less nor greater), ``in (a,b)``,
``notin (a,b)``. A missing field is the empty value: ``x=`` matches it,
``x!=a`` matches it. Under a ``*`` segment a positive operator asks for any
element, a negative one for none (``spec.containers.*.image!~nginx``: no
container runs nginx), so that ``!=`` is always the opposite of ``=``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from app.query.fieldpath import FieldPath, PathError, parse_path, scalar_text
from app.query.comparison import EMPTY, sort_key

__all__ = ["Filter", "FilterError", "parse_filter"]

_MAX_VALUES = 256


class FilterError(ValueError):
    """A filter that cannot be parsed; the message points at the token."""


class Filter:
    """One parsed condition; immutable, shared by every request that writes it alike."""

    __slots__ = ("text", "path", "op", "operand", "negated", "_test")

    def __init__(self, text: str, path: FieldPath, op: str, operand: str | frozenset[str]) -> None:
        self.text = text
        self.path = path
        self.op = op
        self.operand = operand
        self.negated = op in ("!=", "!~", "notin")
        self._test = _tests(op, operand)

    def __repr__(self) -> str:
        return f"Filter({self.text!r})"

    def matches_values(self, values: list[Any]) -> bool:
        """Whether the values the path reached (none: the field is missing) pass."""
        test = self._test
        hit = any(test(v) for v in values) if values else test(None)
        return hit != self.negated

    def mask(self, column: list[list[Any]]) -> list[bool]:
        """``matches_values`` over a column of many objects' values, in one pass."""
        test, negated = self._test, self.negated
        if not self.path.wild:  # one value at most: no per-object generator
            return [test(v[0] if v else None) != negated for v in column]
        return [(any(test(x) for x in v) if v else test(None)) != negated for v in column]

    def matches(self, obj: dict[str, Any]) -> bool:
        """Whether a decoded object passes."""
        return self.matches_values(self.path.values(obj))


def _tests(op: str, operand: str | frozenset[str]) -> Callable[[Any], bool]:
    """The positive test of ``op`` for one value (negation is applied over all values)."""
    # (text is the common case: tested first, without a call)
    if op in ("=", "!="):
        return lambda v: (v if v.__class__ is str else scalar_text(v)) == operand
    if op in ("~", "!~"):
        needle = str(operand).casefold()
        return lambda v: needle in (v if v.__class__ is str else scalar_text(v)).casefold()
    if op in ("in", "notin"):
        return lambda v: (v if v.__class__ is str else scalar_text(v)) in operand
    bound = sort_key(operand)
    text = str(operand)
    below = op == "<"

    def compare(value: Any) -> bool:
        key = sort_key(value)
        if key == EMPTY:
            return False
        if key[0] == bound[0]:
            return key[1] < bound[1] if below else key[1] > bound[1]
        other = scalar_text(value)
        return other < text if below else other > text

    return compare


_SYMBOLS = ("==", "!=", "!~", "=", "~", "<", ">")


@functools.lru_cache(maxsize=1024)
def parse_filter(text: str) -> Filter:
    """Parse one ``PATH OP VALUE``.

    Raises:
        FilterError: no operator, a bad path, a set without parentheses.
    """
    i, n = 0, len(text)
    while i < n and text[i] == " ":
        i += 1
    start = i
    while i < n and text[i] not in " =!~<>":
        if text[i] == "[":
            end = text.find("]", i)
            i = n if end < 0 else end
        i += 1
    path_text = text[start:i]
    if not path_text:
        raise FilterError(f"filter {text!r}: expected a field path at character {start + 1}")
    try:
        path = parse_path(path_text, wildcard=True)
    except PathError as exc:
        raise FilterError(f"filter {text!r}: {exc}") from None
    while i < n and text[i] == " ":
        i += 1
    rest = text[i:]
    for symbol in _SYMBOLS:
        if rest.startswith(symbol):
            value = rest[len(symbol):].strip(" ")
            op = "=" if symbol == "==" else symbol
            if op in ("<", ">") and not value:
                raise FilterError(f"filter {text!r}: {op!r} needs a value to compare with")
            return Filter(text, path, op, value)
    for word in ("notin", "in"):
        if rest.startswith(word) and rest[len(word):len(word) + 1] in (" ", "("):
            return Filter(text, path, word, _set(text, rest[len(word):].strip(" ")))
    where = i + 1
    found = repr(rest[:16]) if rest else "the end"
    raise FilterError(f"filter {text!r}: expected an operator (=, !=, ~, !~, <, >, in, notin) "
                      f"after {path_text!r} at character {where}, found {found}")


def _set(text: str, rest: str) -> frozenset[str]:
    if not (rest.startswith("(") and rest.endswith(")")):
        raise FilterError(f"filter {text!r}: a set is written in parentheses, e.g. 'in (a,b)'")
    members = [m.strip(" ") for m in rest[1:-1].split(",")]
    if members == [""]:
        raise FilterError(f"filter {text!r}: the set is empty")
    if len(members) > _MAX_VALUES:
        raise FilterError(f"filter {text!r}: more than {_MAX_VALUES} values")
    return frozenset(members)
