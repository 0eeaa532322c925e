"""How values compare: numbers, quantities and timestamps by value, the rest as text.

``sortBy`` and the ``<``/``>`` filters order values as a person reading a
dashboard expects: ``9`` before ``10``, ``100m`` before ``1`` before ``1Gi``,
``2024-01-02T00:00:00Z`` after ``2024-01-01T23:00:00+00:00``. A value's sort
key is a pair (kind, value) so that every value has a place in one total
order: missing or empty first (the contract: a missing value sorts as the
empty value), then numbers and quantities by value, then timestamps, then
booleans, then text. Keys are computed once per (object version, path) and
kept in the resource's columns (``app.query.values``).
"""

from __future__ import annotations

import functools
import re
from datetime import datetime
from decimal import Decimal
from typing import Any

from app.query.fieldpath import scalar_text

__all__ = ["EMPTY", "sort_key"]

_EMPTY, _NUMBER, _TIME, _BOOL, _TEXT = 0, 1, 2, 3, 4
EMPTY = (_EMPTY, 0)

_SUFFIX = {
    "": Decimal(1),
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
    "P": Decimal("1e15"), "E": Decimal("1e18"),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
    "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}
# A Kubernetes quantity (resource.Quantity's grammar) or a plain number.
_QUANTITY = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
                       r"(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?")
# RFC 3339 as the API server writes it (and with fractions or an offset).
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}"
                        r"(?:\.[0-9]+)?(?:[Zz]|[+-][0-9]{2}:[0-9]{2})")


def sort_key(value: Any) -> tuple[int, Any]:
    """The place of a JSON value in the one order all values share."""
    if value is None or value == "":
        return EMPTY
    if value is True or value is False:
        return (_BOOL, value)
    if isinstance(value, (int, float)):
        return (_NUMBER, value)
    if isinstance(value, str):
        # only short text can be a number or a timestamp (and only short text is cached)
        return _text_key(value) if len(value) <= 64 else (_TEXT, value)
    return (_TEXT, scalar_text(value))


@functools.lru_cache(maxsize=65536)
def _text_key(text: str) -> tuple[int, Any]:
    first = text[0]
    if first.isdigit() or first in "+-.":
        number = _quantity(text)
        if number is not None:
            return (_NUMBER, number)
        if _TIMESTAMP.fullmatch(text):
            moment = _timestamp(text)
            if moment is not None:
                return (_TIME, moment)
    return (_TEXT, text)


def _quantity(text: str) -> float | None:
    match = _QUANTITY.fullmatch(text)
    if match is None:
        return None
    try:
        number = Decimal(match.group(1))
        if match.group(2):
            number = number.scaleb(int(match.group(2)[1:]))
        elif match.group(3):
            number *= _SUFFIX[match.group(3)]
    except (ArithmeticError, ValueError):  # InvalidOperation, Overflow
        return None
    return float(number)


def _timestamp(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("z", "Z").replace("t", "T")).timestamp()
    except ValueError:
        return None
