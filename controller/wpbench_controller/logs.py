"""The controller's log lines: plain text, or (`--log-format json`) one JSON object per line.

A JSON line has `time` (UTC, RFC 3339 with milliseconds), `level`, `logger`, `message`, and, when the line
was written while a run was being reconciled, `namespace` and `run` (`reconciling`); a logged exception
adds `exception` (its traceback). A call can also name them itself: `log.info(..., extra={"run": ...})`.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_RUN: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("wpbench_run", default=None)


@contextlib.contextmanager
def reconciling(namespace: str, run: str) -> Iterator[None]:
    """Lines logged on this thread inside the block carry the run (JSON format)."""
    token = _RUN.set((namespace, run))
    try:
        yield
    finally:
        _RUN.reset(token)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created, UTC)
        doc: dict[str, Any] = {
            "time": when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        current = _RUN.get()
        namespace = getattr(record, "namespace", None) or (current[0] if current else None)
        run = getattr(record, "run", None) or (current[1] if current else None)
        if namespace:
            doc["namespace"] = str(namespace)
        if run:
            doc["run"] = str(run)
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            doc["exception"] = record.exc_text
        # ensure_ascii: a message quoting candidate output cannot break the one-object-per-line framing
        return json.dumps(doc, ensure_ascii=True)


def configure(level: str, fmt: str) -> None:
    """The root logger on stderr, in `fmt` ("text" or "json")."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
