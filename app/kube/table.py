"""``Table`` answers for kubectl (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``).

Rows come from ``app.kube.printers``; each row's ``object`` is a
``PartialObjectMetadata`` (the default), the whole object
(``includeObject=Object``) or nothing (``includeObject=None``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from app.kube.envelope import list_metadata
from app.kube.printers import Column, Row

__all__ = ["Printer", "table_bytes"]

Printer = tuple[list[Column], Callable[[dict, dt.datetime], Row]]


def _row_object(obj: dict, include: str, table_version: str) -> Any:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{table_version}",
            "metadata": obj.get("metadata") or {}}


def table_bytes(objects: Iterable[dict], printer: Printer, *, table_version: str = "v1",
                include: str = "Metadata", headers: bool = True, resource_version: str = "",
                continue_token: str = "", remaining: int | None = None) -> bytes:
    """Render objects as one ``Table``."""
    columns, row_fn = printer
    now = dt.datetime.now(dt.timezone.utc)
    rows = []
    for obj in objects:
        cells, conditions = row_fn(obj, now)
        row: dict[str, Any] = {"cells": cells}
        if conditions:
            row["conditions"] = conditions
        row_object = _row_object(obj, include, table_version)
        if row_object is not None:
            row["object"] = row_object
        rows.append(row)
    table: dict[str, Any] = {"kind": "Table", "apiVersion": f"meta.k8s.io/{table_version}",
                             "metadata": list_metadata(resource_version, continue_token, remaining)}
    if headers:
        table["columnDefinitions"] = columns
    table["rows"] = rows
    return orjson.dumps(table)
