"""``convmon judge check``: one preflight against the configured endpoint, and the settings it calls for.

Three small calls, each with the configured model, key and timeout but no retry: a one-word answer
(reachability and latency), the SPUR schema of the configured rubric (which structured output the
endpoint takes: the rules schema, the plain one, ``json_object`` or none; see :mod:`monitor.judge.formats`) and one
logprobs token (whether ``top_logprobs`` come back with Yes/No in them). The calls are short
(``max_tokens`` 16 or 1) and are not booked in the shared daily budget. From the answers it says
which settings to use; ``--json`` prints the same as one object.
"""

from __future__ import annotations

import ipaddress
import time
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

from monitor.contracts.errors import JudgeError
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricSet
from monitor.contracts.sections import JudgeSettings
from monitor.judge.client import JudgeClient
from monitor.judge.formats import JSON_OBJECT, PLAIN, RULES
from monitor.judge.logprobs import yes_no_mass
from monitor.judge.spur import spur_schema

_PROBE = [{"role": "system", "content": "You answer with exactly one word."},
          {"role": "user", "content": "Is water wet? Answer Yes or No."}]
_LEVELS = {RULES: "rules_schema", PLAIN: "plain_schema", JSON_OBJECT: "json_object"}
_SLOW_S = 5.0  # a one-word answer slower than this is a local or overloaded server


@dataclass
class Probe:
    ok: bool
    latency_s: float | None = None
    detail: str = ""


@dataclass
class CheckReport:
    endpoint: str
    model: str
    reachable: Probe
    structured: Probe
    structured_output: str  # rules_schema | plain_schema | json_object | none | unknown
    logprobs: Probe
    yes_no_mass: float | None = None
    seconds_per_output_token: float | None = None
    settings: dict[str, str] = field(default_factory=dict)  # CONVMON_* -> value to use
    notes: list[str] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        return self.reachable.ok

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "usable": self.usable}


async def _timed(call: Any) -> tuple[Any, Probe]:
    started = time.perf_counter()
    try:
        result = await call
    except JudgeError as exc:
        return None, Probe(ok=False, latency_s=round(time.perf_counter() - started, 3), detail=str(exc))
    return result, Probe(ok=True, latency_s=round(time.perf_counter() - started, 3))


async def check_endpoint(judge: JudgeSettings, rubric: RubricSet, metrics: Metrics) -> CheckReport:
    """Probe the endpoint ``judge`` names; never raises for what the endpoint answers."""
    settings = judge.model_copy(update={"judge_max_retries": 0, "judge_structured_output": True})
    client = JudgeClient(settings, metrics)
    model = judge.judge_model
    try:
        text, reachable = await _timed(client.complete(_PROBE, max_tokens=16))
        rules = spur_schema(list(rubric.items))
        plain = spur_schema(list(rubric.items), rules=False)
        asked = [{"role": "system", "content": "Answer with one JSON object for the rubric items."},
                 {"role": "user", "content": "The user said thanks and left."}]
        answer, structured = await _timed(client.complete(asked, response_format=rules, plain_format=plain,
                                                          max_tokens=16))
        level = "unknown" if answer is None else _LEVELS.get(client.formats.level(model), "none")
        tokens, logprobs = await _timed(client.complete(_PROBE, logprobs=True, top_logprobs=20, max_tokens=1))
    finally:
        await client.aclose()
    report = CheckReport(endpoint=client.endpoint, model=model, reachable=reachable, structured=structured,
                         structured_output=level, logprobs=logprobs)
    if tokens is not None:
        if tokens.top_logprobs:
            report.yes_no_mass = round(sum(yes_no_mass(tokens.top_logprobs[0])), 4)
        else:
            report.logprobs = Probe(ok=False, latency_s=logprobs.latency_s, detail="no top_logprobs in the answer")
    report.seconds_per_output_token = _seconds_per_output_token([text, answer])
    _advise(report, judge)
    return report


def _seconds_per_output_token(answers: list[Any]) -> float | None:
    """An upper bound on the decoding time per token: the least latency per completion token of the probes.

    Each latency also holds the connection, the prompt's prefill and, for the first request to a local server,
    its warm-up: a one-word answer alone made a 135M model on a busy CPU look 80x slower per token (2.8 s) than
    its 16-token answer a moment later (0.036 s), and the advice then asked for a timeout of hours."""
    rates = [a.latency_s / a.usage.completion for a in answers
             if a is not None and a.usage.completion and a.latency_s]
    return round(min(rates), 4) if rates else None


def _local(base_url: str | None) -> bool:
    host = urlsplit(base_url or "").hostname or ""
    if host == "localhost" or host.endswith(".local"):
        return True
    try:
        return ipaddress.ip_address(host).is_private or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _advise(report: CheckReport, judge: JudgeSettings) -> None:
    """The settings this endpoint calls for, and why (in ``notes``)."""
    use, notes = report.settings, report.notes
    if not report.reachable.ok:
        notes.append(f"the endpoint did not answer a one-word question: {report.reachable.detail}")
        return
    if report.structured_output == "none":
        use["CONVMON_JUDGE_STRUCTURED_OUTPUT"] = "false"
        use["CONVMON_JUDGE_ANSWER_REPAIR"] = "lenient"
        notes.append("the endpoint refused every JSON-schema response_format: answers come as free text, which "
                     "only the lenient parser reads")
    elif report.structured_output == "json_object":
        notes.append("the endpoint refused every JSON schema and took response_format json_object: convmon steps "
                     "down by itself; the answer's keys, types and ranges are checked locally")
    elif report.structured_output == "plain_schema":
        notes.append("the endpoint refused the schema with the answer rules (anyOf, minimum/maximum) and took the "
                     "plain one: convmon steps down by itself; the rules are checked locally")
    if report.logprobs.ok and report.yes_no_mass is not None and report.yes_no_mass < 0.5:
        notes.append(f"Yes/No hold only {report.yes_no_mass:.2f} of the first token's probability: logprobs mode "
                     "works but the model is unsure what to answer")
    if not report.logprobs.ok:
        if judge.judge_mode == "logprobs":
            use["CONVMON_JUDGE_MODE"] = "spur"
        notes.append(f"logprobs mode is not available: {report.logprobs.detail}")
    slow = (report.reachable.latency_s or 0) > _SLOW_S
    if _local(judge.openai_base_url) or slow:
        use["CONVMON_JUDGE_PROFILE"] = "local"
        why = "a one-word answer took %.1f s" % (report.reachable.latency_s or 0) if slow else "a local endpoint"
        notes.append(f"{why}: one request at a time, a long timeout, no retry of a timeout (docs/judge.md)")
    if report.seconds_per_output_token is not None:
        full = report.seconds_per_output_token * judge.judge_max_output_tokens
        timeout = judge.judge_timeout_s if use.get("CONVMON_JUDGE_PROFILE") != "local" else max(
            judge.judge_timeout_s, 600.0)
        if full * 2 > timeout:
            use["CONVMON_JUDGE_TIMEOUT_S"] = str(int(full * 2) + 1)
            notes.append(f"a full SPUR answer of up to {judge.judge_max_output_tokens} tokens may take about "
                         f"{full:.0f} s at the measured {report.seconds_per_output_token} s per output token")
