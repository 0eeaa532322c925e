"""``--history URL`` to its store: the engine by scheme, the password from where it is kept.

``sqlite:///abs/path.db`` (or SQLAlchemy's ``sqlite:////abs/path.db``) and ``sqlite:relative.db`` (``sqlite://`` with a host is refused:
a file has none); ``postgresql://`` (or ``postgres://``) as libpq reads it. A PostgreSQL
password is taken, in order, from ``--history-password-file``, ``KCG_HISTORY_PASSWORD``,
the URL (logged redacted, but better kept out of it), then libpq's own ``PGPASSWORD`` and
``PGPASSFILE``.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlsplit

from app.history.postgres_store import PostgresStore
from app.history.sqlite_store import SQLiteStore
from app.history.store import HistoryStore, redacted

__all__ = ["open_store"]


def open_store(url: str, password_file: str = "") -> HistoryStore:
    """The store ``url`` names (not yet connected: ``create`` connects).

    Raises:
        ValueError: a URL of no store, or a password file that cannot be read.
    """
    scheme = url.partition(":")[0].lower()
    if scheme == "sqlite":
        parts = urlsplit(url)
        if parts.netloc:
            raise ValueError(f"--history {url}: a SQLite store is a file: sqlite:///ABSOLUTE/PATH "
                             f"or sqlite:RELATIVE/PATH, with no host")
        path = unquote(parts.path)
        if path.startswith("//"):
            path = "/" + path.lstrip("/")  # sqlite:////abs/path, as SQLAlchemy writes it
        if not path or path.endswith("/"):
            raise ValueError(f"--history {url}: name the file (sqlite:///var/lib/kcg/history.db)")
        return SQLiteStore(url, path)
    if scheme in ("postgresql", "postgres"):
        password = None
        if password_file:
            try:
                with open(password_file, encoding="utf-8") as handle:
                    password = handle.read().strip()
            except OSError as exc:
                raise ValueError(f"--history-password-file: {exc.strerror}: {password_file}") from None
        elif os.environ.get("KCG_HISTORY_PASSWORD"):
            password = os.environ["KCG_HISTORY_PASSWORD"]
        return PostgresStore(url, password)
    raise ValueError(f"--history takes sqlite:///PATH or postgresql://USER@HOST/DB, not "
                     f"{redacted(url)!r}")
