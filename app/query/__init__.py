"""Queries for dashboards, over any resource: field paths, comparison of values, ``filter``, ``sortBy``, ``fields`` and ``summary``, the per-path value cache, the selection of objects, and the engine that keeps results and answers per version."""

__all__: list[str] = []
