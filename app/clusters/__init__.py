"""Clusters: one ``Cluster`` object per cluster the gateway serves, everything that talks to its
API server or holds its data in one place, so that a request resolves its cluster once, at
the entry, and nothing after reaches around it."""

__all__: list[str] = []
