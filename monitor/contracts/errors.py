"""Every error convmon raises on purpose derives from ``ConvmonError``.

    ConvmonError
    ├── ConfigError            settings or a CLI argument cannot be used
    ├── InvalidEvent           an input record failed validation (goes to the dead-letter topic)
    ├── RubricError            a rubric-set file is malformed
    ├── JudgeError             the LLM judge could not score a conversation
    │   ├── JudgeResponseError     the answer did not parse or missed items, after repair
    │   ├── JudgeUnavailable       retries exhausted on 429 / 5xx / timeouts
    │   └── BudgetExhausted        the daily spend budget is used up
    ├── ModelError             a model artifact is missing, malformed or incompatible
    └── StoreError             the label store could not be read or written
        └── LabelRejected          the database refused one label's data (not the connection)
"""

from __future__ import annotations


class ConvmonError(Exception):
    """Base class: catch this to handle anything convmon raises deliberately."""


class ConfigError(ConvmonError):
    """Raised when settings, a config file or a CLI argument cannot be used."""


class InvalidEvent(ConvmonError):
    """Raised when an input record fails validation.

    ``reason`` is a short, bounded code used as a metric label and dead-letter reason
    (``malformed_json``, ``invalid_schema``, ``too_large``, ``late_event``, ...);
    ``detail`` is the human-readable explanation naming the field (it may quote user text);
    ``field`` the failing top-level field's name, when one failed; ``conversation_id`` the record's
    conversation, when it could be read (for an opaque reference in logs, never the id itself); ``turn``
    whether the record was a turn of that conversation, and ``turn_index`` its index when readable (the
    conversation is then incomplete: monitor/stages/sessionize.py).
    """

    def __init__(self, reason: str, detail: str, *, field: str | None = None,
                 conversation_id: str | None = None, turn: bool = False, turn_index: int | None = None) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.field = field
        self.conversation_id = conversation_id
        self.turn = turn
        self.turn_index = turn_index


class RubricError(ConvmonError):
    """Raised when a rubric-set YAML file is missing, malformed or has duplicate item ids."""


class JudgeError(ConvmonError):
    """Raised when the LLM judge cannot produce a score record; ``reason`` is a bounded code."""

    reason = "judge_error"

    def __init__(self, detail: str, *, reason: str | None = None) -> None:
        super().__init__(detail)
        if reason is not None:
            self.reason = reason


class JudgeResponseError(JudgeError):
    """Raised when the judge's answer cannot be parsed or misses items, even after a repair prompt."""

    reason = "judge_unparseable"


class JudgeUnavailable(JudgeError):
    """Raised when the endpoint kept failing (429, 5xx, timeouts) through the whole retry budget."""

    reason = "judge_unavailable"


class BudgetExhausted(JudgeError):
    """Raised when the daily spend budget is used up; the router stops sending to the judge."""

    reason = "budget_exhausted"


class ModelError(ConvmonError):
    """Raised when a model artifact is missing, malformed, or built for another rubric set."""


class StoreError(ConvmonError):
    """Raised when the label store cannot be reached or written."""


class LabelRejected(StoreError):
    """Raised when the database refuses a label's *data* (SQLSTATE classes 22/23, an unadaptable value).

    Retrying the same rows cannot succeed, unlike an outage: the label sink isolates the row and
    dead-letters it with this message as the reason's detail.
    """
