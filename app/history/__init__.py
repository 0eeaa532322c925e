"""The past kept: every change the caches see, in a store (SQLite embedded, PostgreSQL shared), read back through the same Kubernetes paths."""

__all__: list[str] = []
