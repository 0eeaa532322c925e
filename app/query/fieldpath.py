"""Dotted paths into an object, as dashboards write them: ``status.phase``,
``metadata.labels[app.kubernetes.io/name]``, ``spec.containers.0.image``,
``spec.containers.*.image``.

One syntax for ``filter``, ``sortBy``, ``fields`` and ``summary``: dots split
segments as in field selectors, a key that holds dots is written in brackets,
a number segment indexes a list (on a mapping it is an ordinary key), and a
``*`` segment (allowed where the caller says so) means every element. A path
is parsed once per query text and kept (``parse_path``), then read many times.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import orjson

__all__ = ["FieldPath", "PathError", "parse_path", "parse_path_list", "scalar_text"]

_WILDCARD = "*"
_MAX_SEGMENTS = 32
_MAX_LENGTH = 512


class PathError(ValueError):
    """A path that cannot be parsed; the message says where."""


class FieldPath:
    """A parsed path: its segments and whether any is a wildcard; immutable."""

    __slots__ = ("text", "segments", "wild")

    def __init__(self, text: str, segments: tuple[str, ...]) -> None:
        self.text = text
        self.segments = segments
        self.wild = _WILDCARD in segments

    def __repr__(self) -> str:
        return f"FieldPath({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FieldPath) and other.segments == self.segments

    def __hash__(self) -> int:
        return hash(self.segments)

    def values(self, obj: Any) -> list[Any]:
        """Every value the path reaches in ``obj`` (one at most without ``*``)."""
        return list(_walk(obj, self.segments, 0))

    def value(self, obj: Any) -> Any:
        """The value the path reaches, or None (the first one under ``*``)."""
        for found in _walk(obj, self.segments, 0):
            return found
        return None


def _walk(node: Any, segments: tuple[str, ...], at: int) -> Iterator[Any]:
    while at < len(segments):
        segment = segments[at]
        if segment == _WILDCARD:
            children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
            for child in children:
                yield from _walk(child, segments, at + 1)
            return
        if isinstance(node, dict):
            if segment not in node:
                return
            node = node[segment]
        elif isinstance(node, list) and segment.isdigit():
            index = int(segment)
            if index >= len(node):
                return
            node = node[index]
        else:
            return
        at += 1
    yield node


def scalar_text(value: Any) -> str:
    """The text a value compares as: JSON's spelling of a scalar, ``""`` for none."""
    if value is None:
        return ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return repr(value) if isinstance(value, float) else str(value)
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


@functools.lru_cache(maxsize=1024)
def parse_path(text: str, wildcard: bool = False) -> FieldPath:
    """Parse ``text`` into a ``FieldPath``.

    Raises:
        PathError: an empty segment, an unclosed or stray bracket, a ``*`` where
            none is allowed, or a path too long to be meant.
    """
    if not text:
        raise PathError("empty path")
    if len(text) > _MAX_LENGTH:
        raise PathError(f"path longer than {_MAX_LENGTH} characters")
    segments: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] == "[":
            end = text.find("]", i + 1)
            if end < 0:
                raise PathError(f"unclosed '[' at character {i + 1} of {text!r}")
            key = text[i + 1:end]
            if not key:
                raise PathError(f"empty key '[]' at character {i + 1} of {text!r}")
            segments.append(key)
            i = end + 1
            if i < n and text[i] not in ".[":
                raise PathError(f"expected '.' or '[' after ']' at character {i + 1} of {text!r}")
            if i < n and text[i] == ".":
                i += 1
                if i == n:
                    raise PathError(f"path {text!r} ends with '.'")
            continue
        stop = i
        while stop < n and text[stop] not in ".[]":
            stop += 1
        if stop < n and text[stop] == "]":
            raise PathError(f"stray ']' at character {stop + 1} of {text!r}")
        segment = text[i:stop]
        if not segment:
            raise PathError(f"empty segment at character {i + 1} of {text!r}")
        if segment == _WILDCARD and not wildcard:
            raise PathError(f"'*' is allowed only in filter paths ({text!r})")
        segments.append(segment)
        i = stop
        if i < n and text[i] == ".":
            i += 1
            if i == n:
                raise PathError(f"path {text!r} ends with '.'")
    if len(segments) > _MAX_SEGMENTS:
        raise PathError(f"path {text[:64]!r} has more than {_MAX_SEGMENTS} segments")
    if segments == [_WILDCARD]:  # every top-level field: the whole object, not a field
        raise PathError(f"'*' alone names no field; name one, as in spec.containers.*.image "
                        f"({text!r})")
    return FieldPath(text, tuple(segments))


def parse_path_list(text: str, parameter: str, most: int,
                    error: type[ValueError] = PathError) -> tuple[FieldPath, ...]:
    """Parse ``PATH,PATH,...`` (no ``*``), the value of ``parameter``; repeats are dropped.

    Raises:
        error: an empty path, a bad path, more than ``most`` paths; the message names
            ``parameter`` and quotes its value.
    """
    paths = []
    for part in text.split(","):
        part = part.strip(" ")
        if not part:
            raise error(f"{parameter} {text!r}: an empty path")
        try:
            paths.append(parse_path(part))
        except PathError as exc:
            raise error(f"{parameter} {text!r}: {exc}") from None
    if len(paths) > most:
        raise error(f"{parameter} {text!r}: at most {most} paths")
    return tuple(dict.fromkeys(paths))
