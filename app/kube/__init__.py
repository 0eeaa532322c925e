"""Kubernetes on the wire: request paths and query parameters as the API server reads them, list envelopes, ``Status`` errors, and ``Table`` answers with their printers."""

__all__: list[str] = []
