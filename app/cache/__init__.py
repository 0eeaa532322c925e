"""What a cluster holds in memory for the HTTP layer: per-resource caches loaded on first use, their event hubs, and what an answer says about versions (the version a request asks for, how old an answer may be)."""

__all__: list[str] = []
