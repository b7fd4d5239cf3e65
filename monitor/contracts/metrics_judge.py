"""The judge's operational metrics: requests, latency, tokens, spend and budget, answer validation, retries.
Part of :class:`monitor.contracts.metrics.Metrics`.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120)


class JudgeMetrics:
    """How the LLM judge is doing: its calls, what they cost and how its answers parse."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        # --- judge operations -------------------------------------------------------------------
        self.judge_requests = Counter(
            "convmon_judge_requests", "Judge API requests, by status.", ["model", "status"], registry=r
        )
        self.judge_latency = Histogram(
            "convmon_judge_request_duration_seconds",
            "Judge API request latency.",
            ["model"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.judge_tokens = Counter(
            "convmon_judge_tokens", "Judge tokens, by kind (prompt, completion, cached).", ["model", "kind"],
            registry=r,
        )
        self.judge_spend = Counter("convmon_judge_spend_usd", "Judge spend in US dollars.", ["model"], registry=r)
        self.judge_budget_remaining = Gauge(
            "convmon_judge_budget_remaining_usd", "What is left of today's judge budget.", registry=r
        )
        self.judge_budget_exhausted = Gauge(
            "convmon_judge_budget_exhausted", "1 while the daily judge budget is spent.", registry=r
        )
        # --- judge budget: booked in the label store's database, shared by every worker --------
        self.judge_budget_spent = Gauge(
            "convmon_judge_budget_spent_usd",
            "Today's (UTC) judge spend booked across all workers, in-flight reservations included, as this "
            "worker last read it from the ledger (the same cluster total on every worker: use max()).",
            registry=r,
        )
        self.judge_budget_booked = Counter(
            "convmon_judge_budget_booked_usd",
            "Judge spend this worker booked (each call at most its locally computed bound): sum() over workers.",
            registry=r,
        )
        self.judge_budget_store_errors = Counter(
            "convmon_judge_budget_store_errors",
            "Failed reads/writes of the budget ledger (judging waits while it is unreachable).",
            registry=r,
        )
        self.judge_usage_capped = Counter(
            "convmon_judge_usage_capped",
            "Judge responses whose reported usage exceeded the locally computed bound (booked at the bound).",
            ["model"],
            registry=r,
        )
        self.judge_parse_failures = Counter(
            "convmon_judge_parse_failures", "Judge answers that failed to parse or missed items.", registry=r
        )
        self.judge_answers_rejected = Counter(
            "convmon_judge_answers_rejected",
            "Judge answers refused by strict validation, by problem (not_json, prose, several_objects, extra_keys, "
            "missing_keys, bad_value); each gets a repair prompt, a second failure is dead-lettered.",
            ["problem"],
            registry=r,
        )
        self.judge_answer_repairs = Counter(
            "convmon_judge_answer_repairs",
            "Judge answers accepted only through a repair, by kind (fence_removed: one JSON object alone in a "
            "code fence; prose_stripped, lenient: the configured judge_answer_repair).",
            ["kind"],
            registry=r,
        )
        self.judge_repairs = Counter(
            "convmon_judge_repairs", "Repair prompts sent after a bad judge answer, by outcome.", ["outcome"],
            registry=r,
        )
        self.judge_retries = Counter(
            "convmon_judge_retries", "Judge retries, by cause (429, 5xx, timeout).", ["cause"], registry=r
        )
        self.jury_disagreements = Counter(
            "convmon_jury_disagreements", "Items on which jury members disagreed.", ["rubric"], registry=r
        )
        self.judge_in_flight = Gauge("convmon_judge_in_flight", "Judge requests in flight.", registry=r)
        self.judge_configured = Gauge(
            "convmon_judge_configured",
            "1 when a judge endpoint is configured (OPENAI_API_KEY / OPENAI_BASE_URL); 0 when only the simulator's "
            "conversations can be judged and the rest of the judge slice is routed as unjudged.",
            registry=r,
        )
        # --- real servers and answer size ---------------------------------------------
        self.judge_structured_fallback = Gauge(
            "convmon_judge_structured_fallback",
            "The answer format this worker uses with an endpoint (host:port) and model, as learned from its "
            "refusals: 0 = JSON schema with the answer rules, 1 = plain JSON schema, 2 = json_object, 3 = free text "
            "(the endpoint refused response_format, or judge_structured_output is off).",
            ["endpoint", "model"],
            registry=r,
        )
        self.judge_provenance_changes = Counter(
            "convmon_judge_provenance_changes",
            "Changes of the judge behind the verdicts, by what changed (model as the endpoint reported it, "
            "endpoint, prompt hash, rubric, mode, convmon version): against the previous verdict, and "
            "at a worker's first verdict against the last one recorded in the label store's database.",
            ["what"],
            registry=r,
        )
        self.judge_answers_too_large = Counter(
            "convmon_judge_answers_too_large",
            "Judge answers refused unread for their size, by limit (bytes: judge_max_answer_bytes; tokens: more "
            "completion tokens than the request's max_tokens); the conversation is dead-lettered "
            "judge_answer_too_large.",
            ["limit"],
            registry=r,
        )
