"""Logging set-up: text or JSON lines on standard error, a worker's lines tagged with its index."""

from __future__ import annotations

import logging
import sys

__all__ = ["configure_logging"]


def configure_logging(level: str, as_json: bool, worker: int | None = None) -> None:
    """Logs to stderr, as text or JSON lines; a worker's lines say which worker it is."""
    handler = logging.StreamHandler(sys.stderr)
    if as_json:
        import json

        class JSONFormatter(logging.Formatter):
            def format(self, record: logging.LogRecord) -> str:
                doc = {"time": self.formatTime(record), "level": record.levelname.lower(),
                       "logger": record.name, "message": record.getMessage()}
                if worker is not None:
                    doc["worker"] = worker
                if record.exc_info:
                    doc["exception"] = self.formatException(record.exc_info)
                return json.dumps(doc)

        handler.setFormatter(JSONFormatter())
    else:
        tag = f" [worker {worker}]" if worker is not None else ""
        handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s{tag} %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
