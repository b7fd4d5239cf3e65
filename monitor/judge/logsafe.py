"""Keeping the judge endpoint's credentials out of logs.

``OPENAI_BASE_URL`` may carry ``user:pass@`` (a proxy, a self-hosted vLLM behind basic auth), and
httpx logs every request URL at INFO, the openai client at DEBUG. :func:`install_log_safety` quiets
httpx/httpcore to WARNING (their INFO lines are one per request: noise at production rates) and
installs a log-record factory that masks URL credentials in every record of every logger, whatever
handlers faust or a user configure later.

The factory formats a record's message first and, when scrubbing changed it, keeps the scrubbed
text as a message with *no* arguments: ``args`` becomes ``()``, not ``None``. faust's formatter
(mode's ``ExtensionFormatter``) turns ``None`` into ``(None,)`` and then ``msg % (None,)`` fails
("not all arguments converted", or "unsupported format character" on a URL's ``%3D``), which
printed every label-store retry warning as a long ``--- Logging error ---`` block.
"""

from __future__ import annotations

import logging
import re
from typing import Any

# scheme://user:password@ or scheme://token@ -> scheme://***@
_URL_CREDENTIALS = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.\-]*://)[^/\s@?#]+@")
QUIET_LOGGERS = ("httpx", "httpcore")


def scrub_credentials(text: str) -> str:
    """``https://user:pass@host/v1`` -> ``https://***@host/v1``; other text unchanged."""
    return _URL_CREDENTIALS.sub(r"\g<scheme>***@", text) if "@" in text else text


def install_log_safety() -> None:
    """Idempotent; call once where a process configures its logging (the CLI does)."""
    for name in QUIET_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level < logging.WARNING:
            logger.setLevel(logging.WARNING)
    factory = logging.getLogRecordFactory()
    if getattr(factory, "convmon_scrubs", False):
        return

    def make_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a malformed call: logging reports it when it formats the record
            return record
        scrubbed = scrub_credentials(message)
        if scrubbed != message:  # already formatted: nothing left to substitute, whatever % it holds
            record.msg, record.args = scrubbed, ()
        return record

    make_record.convmon_scrubs = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(make_record)
