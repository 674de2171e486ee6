"""The controller's log lines: JSON (one object per line) or text (logfmt-like), both with
an RFC 3339 UTC timestamp, the level, the logger, a fixed message and the structured fields
passed as ``extra=``.

JSON: ``{"ts": "2026-01-02T03:04:05.678Z", "level": "info", "logger": "...", "msg": "...",
<fields>}``. Text: ``2026-01-02T03:04:05.678Z INFO  logger: msg key=value key="a value"``.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any

#: ``--log-format`` values; the first is the default (a person reads a terminal first)
FORMATS = ("text", "json")
#: what ``--log-format`` also accepts, for the name it had before ``text``
ALIASES = {"plain": "text"}

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message"}
#: a text value printed without quotes
_BARE = re.compile(r"[^\s\"=\\]+")


def rfc3339(created: float) -> str:
    """``2026-01-02T03:04:05.678Z``: UTC, milliseconds."""
    stamp = datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def fields(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields of a record (what the caller passed as ``extra=``)."""
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: a fixed message plus lower-case key/value pairs."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": rfc3339(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update(fields(record))
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def _value(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v, default=str)
    return text if _BARE.fullmatch(text) else json.dumps(text)


class TextFormatter(logging.Formatter):
    """``<ts> <LEVEL> <logger>: <msg> key=value ...``; a value with a space or a quote is
    quoted (JSON string), so a line splits back into its fields."""

    def format(self, record: logging.LogRecord) -> str:
        extra = " ".join(f"{k}={_value(v)}" for k, v in fields(record).items())
        head = f"{rfc3339(record.created)} {record.levelname:<7} {record.name}:"
        line = f"{head} {record.getMessage()} {extra}".rstrip()
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def log_format(value: str) -> str:
    """``--log-format``'s type: the name, an alias resolved (argparse checks the choices)."""
    return ALIASES.get(value, value)


def setup(fmt: str, level: str) -> None:
    """Every logger of the process to stderr in ``fmt`` (``FORMATS``) from ``level`` up."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)


__all__ = ["FORMATS", "JsonFormatter", "TextFormatter", "log_format", "rfc3339", "setup"]
