"""What an error status from the judge endpoint means: retry, step down the answer formats, or give up.

Split from :mod:`monitor.judge.client` (its retry loop calls :func:`classify`). Messages name the setting to
check and never carry the request, the key or conversation text.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from monitor.contracts.errors import JudgeError
from monitor.contracts.metrics import Metrics
from monitor.judge.completion import retry_after
from monitor.judge.formats import refuses_format

if TYPE_CHECKING:  # annotations only: the openai package is imported when a client is made (fast worker import)
    import openai

log = logging.getLogger("monitor.judge.client")


def classify(exc: openai.APIStatusError, request: dict[str, Any], metrics: Metrics) -> tuple[str, str, float | None]:
    """(status label, retry cause, server-requested wait); raises for errors a retry cannot fix."""
    code = exc.status_code
    model = request["model"]
    if "response_format" in request and refuses_format(code, _body_text(exc)):
        log.warning("judge %s: the endpoint refused response_format (HTTP %d); trying a simpler answer format",
                    model, code)
        return "format_rejected", "", None
    if code == 429:
        return "rate_limited", "429", retry_after(exc.response.headers)
    if code >= 500 or code in (408, 409):
        return "server_error", "5xx", retry_after(exc.response.headers)
    metrics.judge_requests.labels(model, "client_error").inc()
    if code == 400 and request.get("logprobs"):
        raise JudgeError(
            f"the judge endpoint rejected a logprobs request (HTTP 400) for model {model!r}; use "
            "judge_mode=spur or likert with this endpoint", reason="judge_logprobs_unsupported"
        ) from None
    if code in (401, 403):
        raise JudgeError(
            f"the judge endpoint refused the credentials (HTTP {code}); check OPENAI_API_KEY / "
            "CONVMON_OPENAI_API_KEY", reason="judge_auth"
        ) from None
    if code == 404:
        raise JudgeError(
            f"the judge endpoint has no model {model!r} (HTTP 404); check judge_model and openai_base_url",
            reason="judge_not_found",
        ) from None
    raise JudgeError(f"the judge endpoint rejected the request (HTTP {code})", reason="judge_bad_request") from None


def _body_text(exc: openai.APIStatusError) -> str:
    """The error answer's body as text (already read by the openai client, within judge_max_answer_bytes)."""
    try:
        return str(exc.response.text)
    except Exception:  # a body that cannot be decoded names nothing
        return ""
