"""Logging set-up: every line the process writes to standard error, as text or as JSON.

With ``--log-json`` each line is one JSON object — ``time`` (RFC 3339, UTC), ``level``,
``logger``, ``msg``, and ``exception`` with the traceback when there is one, ``worker``
for one of several workers — whoever writes it: the gateway, uvicorn (its lines reach
these handlers because the server is given no logging configuration of its own:
``app.launch.server``), Python's warnings, and exceptions nobody caught, in any thread.
Text lines carry the same UTC time.
"""

from __future__ import annotations

import logging
import sys
import threading
from datetime import datetime, timezone
from types import TracebackType

import orjson

__all__ = ["JSONFormatter", "TextFormatter", "configure_logging"]


def _rfc3339(created: float) -> str:
    return datetime.fromtimestamp(created, timezone.utc).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


class JSONFormatter(logging.Formatter):
    """One JSON object per record."""

    def __init__(self, worker: int | None = None) -> None:
        super().__init__()
        self._worker = worker

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, object] = {"time": _rfc3339(record.created),
                                  "level": record.levelname.lower(), "logger": record.name,
                                  "msg": record.getMessage()}
        if self._worker is not None:
            doc["worker"] = self._worker
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        elif record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(doc).decode()


class TextFormatter(logging.Formatter):
    """``TIME LEVEL [worker N] LOGGER: MESSAGE``, the time in RFC 3339 UTC."""

    def __init__(self, worker: int | None = None) -> None:
        tag = f" [worker {worker}]" if worker is not None else ""
        super().__init__(f"%(asctime)s %(levelname)s{tag} %(name)s: %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        return _rfc3339(record.created)


def configure_logging(level: str, as_json: bool, worker: int | None = None) -> None:
    """Send every line of the process to standard error, as JSON lines or text."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter(worker) if as_json else TextFormatter(worker))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi"):
        server_log = logging.getLogger(name)  # uvicorn's own lines: through the same handler
        server_log.handlers.clear()
        server_log.propagate = True
    logging.captureWarnings(True)  # warnings.warn(...) as log lines, not bare stderr text
    log = logging.getLogger("kube-cache-gateway")

    def uncaught(kind: type[BaseException], value: BaseException,
                 tb: TracebackType | None) -> None:
        if issubclass(kind, KeyboardInterrupt):
            sys.__excepthook__(kind, value, tb)
            return
        log.critical("uncaught exception", exc_info=(kind, value, tb))

    def uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit:
            return
        log.error("uncaught exception in thread %s", args.thread.name if args.thread else "?",
                  exc_info=(args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback))

    sys.excepthook = uncaught
    threading.excepthook = uncaught_in_thread
