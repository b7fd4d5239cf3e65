"""The stream's metrics: records in, conversations finished and routed, scores counted, delivery and
consumer position. Part of :class:`monitor.contracts.metrics.Metrics`.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# From a conversation's end to its score being counted: seconds (distilled) to an hour (judge backlog).
DELAY_BUCKETS = (1, 2.5, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200)


class StreamMetrics:
    """What flows through a worker: input, sessions, routing, score records, delivery, lag."""

    def __init__(self, registry: CollectorRegistry, dims: Sequence[str] = ()) -> None:
        r = registry
        # --- flow ---------------------------------------------------------------------------
        self.events = Counter("convmon_events", "Input records consumed, by kind.", ["kind"], registry=r)
        self.input_unknown_fields = Counter(
            "convmon_input_unknown_fields",
            "Top-level input fields the event contract does not know, by field name (never value): ignored, the "
            "event kept (docs/input.md). At most 32 names per worker; later ones are counted as other.",
            ["field"],
            registry=r,
        )
        self.input_messages_skipped = Counter(
            "convmon_input_messages_skipped",
            "Chat messages read that are not turns (system, developer and tool messages; messages without text, "
            "as an assistant's tool calls), by role: accepted, not scored (CONVMON_INPUT_FORMAT=openai, "
            "docs/input.md).",
            ["role"],
            registry=r,
        )
        self.input_idle = Gauge(
            "convmon_input_idle_seconds",
            "Seconds since this worker last consumed an input record (or since its start): past "
            "input_idle_warn_s it logs a warning naming the topic.",
            registry=r,
        )
        self.conversations = Counter(
            "convmon_conversations_finished",
            "Conversations finished by the sessionizer, by how they ended (end event, idle, producer).",
            ["end_reason"],
            registry=r,
        )
        self.truncated = Counter(
            "convmon_conversations_truncated",
            "Conversations cut to the session caps, each once per cap that cut it (reason: max_turns, max_chars, "
            "max_bytes, max_turn_chars, max_metadata_bytes); turn events and whole conversations alike.",
            ["reason"],
            registry=r,
        )
        self.turns_truncated = Counter(
            "convmon_turns_truncated",
            "Turns dropped by the session caps (max_turns, max_chars, max_bytes) or cut to max_turn_chars, by cap.",
            ["reason"],
            registry=r,
        )
        self.evicted = Counter(
            "convmon_conversations_evicted",
            "Conversations finished early to keep a partition's open conversations under max_open_conversations "
            "(emitted as idle; their later events are late).",
            ["reason"],
            registry=r,
        )
        self.open_conversations = Gauge(
            "convmon_open_conversations",
            "Conversations open in this worker's sessionizer, over the partitions it owns (each holds memory "
            "until it ends, idles out or is evicted).",
            registry=r,
        )
        self.closed_conversations = Gauge(
            "convmon_closed_conversations",
            "Finished conversations this worker remembers (a tombstone each, over the partitions it owns): for "
            "reopen_window_s + closed_retention_s, at most max_closed_conversations per partition.",
            registry=r,
        )
        self.closed_forgotten = Counter(
            "convmon_closed_conversations_forgotten",
            "Finished conversations forgotten before reopen_window_s + closed_retention_s to keep a partition's "
            "under max_closed_conversations: a later event of one starts a new conversation under its id.",
            registry=r,
        )
        self.state_restore = Gauge(
            "convmon_state_restore_seconds",
            "Seconds the last partition assignment took to restore this worker's state before it counted again: "
            "from the assignment to its tables read back from their changelogs and the hot path's indexes "
            "rebuilt (the first sample is the restore at start; 0 until then).",
            registry=r,
        )
        self.conversations_incomplete = Counter(
            "convmon_conversations_incomplete",
            "Finished conversations with a rejected (dead-lettered) turn, by what was done: dead_lettered whole "
            "(reason conversation_incomplete) or scored with an incomplete mark (CONVMON_INCOMPLETE_CONVERSATIONS).",
            ["action"],
            registry=r,
        )
        self.late_events = Counter(
            "convmon_late_events",
            "Events for conversations already finished that they did not hold (late end/turn events).",
            ["kind"],
            registry=r,
        )
        self.redelivered = Counter(
            "convmon_redelivered_events",
            "Events of finished conversations that they already held (a batch delivered again before its offsets "
            "were committed, e.g. across a broker restart): skipped, not dead-lettered.",
            ["kind"],
            registry=r,
        )
        self.routed = Counter(
            "convmon_conversations_routed",
            "Routing decisions, by route: sample (sent to the judge), not_sampled (distilled only), budget_exhausted, "
            "unjudged (in the slice, but no judge endpoint is configured and it has no simulated truth).",
            ["route"],
            registry=r,
        )
        self.judge_sampled = Counter(
            "convmon_judge_sampled",
            "Conversations sent to the judge, by what put them in the slice: hash (the uniform slice), uncertainty "
            "(the distilled models' boost) or feedback (negative user feedback).",
            ["by"],
            registry=r,
        )
        self.judge_nonresponse = Counter(
            "convmon_judge_nonresponse",
            "Judge-topic records that produced no score (judge failure or invalid record), by reason: non-response "
            "of the judge sample. Judge-based rates are over the respondents.",
            ["reason"],
            registry=r,
        )
        self.judge_nonresponse_weight = Counter(
            "convmon_judge_nonresponse_weight",
            "Sum of the importance weights 1/pi of judge non-responses: their share of the weighted judge sample is "
            "nonresponse_weight / (nonresponse_weight + conversations_scored_weight{scorer=\"llm\"}).",
            registry=r,
        )
        self.scored = Counter(
            "convmon_conversations_scored", "Score records exported, by scorer.", ["scorer", *dims], registry=r
        )
        self.unscored = Counter(
            "convmon_conversations_unscored",
            "Conversations the distilled path could not score, by reason (e.g. no live model yet).",
            ["reason"],
            registry=r,
        )
        self.duplicates = Counter(
            "convmon_duplicate_scores",
            "Score records dropped because that (conversation, scorer) was already counted.",
            ["scorer"],
            registry=r,
        )
        self.superseded = Counter(
            "convmon_superseded_scores",
            "Score records of a conversation revision at or below the one already counted (a verdict that came after "
            "a later revision's): on the scores topic, not counted.",
            ["scorer"],
            registry=r,
        )
        self.reopened = Counter(
            "convmon_conversations_reopened",
            "Scored conversations reopened by a later turn or end within the reopen window (CONVMON_REOPEN_WINDOW_S): "
            "each opens a new revision that is scored again.",
            registry=r,
        )
        self.reopenable = Gauge(
            "convmon_reopenable_conversations",
            "Closed conversations this worker keeps reopenable (their turns kept, at most "
            "CONVMON_REOPEN_MAX_CONVERSATIONS per partition).",
            registry=r,
        )
        self.score_delay = Histogram(
            "convmon_score_delay_seconds",
            "End-to-end latency: from a conversation's end (its end event's timestamp, or its last event when it "
            "ended idle) to its score being counted, by scorer.",
            ["scorer"],
            buckets=DELAY_BUCKETS,
            registry=r,
        )
        # --- OTLP input (input_format otlp_traces / otlp_logs) -------------------------
        self.otlp_records = Counter(
            "convmon_otlp_records",
            "Spans / log records read from OTLP input, by signal and outcome: turns (a GenAI call made turns), "
            "no_content (content capture off), not_genai, no_conversation (no conversation id), malformed.",
            ["signal", "outcome"],
            registry=r,
        )
        self.repeated_turns = Counter(
            "convmon_repeated_turns",
            "Turns skipped because the session already holds them (each OTLP call repeats the chat history).",
            registry=r,
        )
        # --- delivery: a record the broker did not take stops commits, then the worker ----
        self.delivery_failures = Counter(
            "convmon_delivery_failures",
            "Records (sends and table changelog writes) the broker did not acknowledge, by topic; the worker "
            "stops committing offsets and exits so its successor re-reads from the last commit.",
            ["topic"],
            registry=r,
        )
        self.commits_blocked = Gauge(
            "convmon_offset_commits_blocked",
            "1 once a delivery failed in this worker: it commits no more offsets and is about to exit.",
            registry=r,
        )
        self.commits_refused = Counter(
            "convmon_offset_commits_refused",
            "Batches whose input offset commit the group refused (it no longer knew this worker, or was "
            "rebalancing): the worker dropped its partitions' state and restores it when the group assigns them again.",
            registry=r,
        )
        self.dead_letters = Counter(
            "convmon_dead_letters", "Records sent to the dead-letter topic, by reason.", ["reason"], registry=r
        )
        self.consumer_lag = Gauge(
            "convmon_consumer_lag_messages", "Messages behind the log end, per topic.", ["topic"], registry=r
        )
        # --- partition layout (runtime/layout.py): read once at start ---------------------------------------
        self.input_partitions = Gauge(
            "convmon_input_partitions",
            "Partitions of the input topic (CONVMON_INPUT_TOPIC), read at start. When it differs from "
            "convmon_internal_topic_partitions every input event is forwarded through the re-keyed topic.",
            registry=r,
        )
        self.internal_partitions = Gauge(
            "convmon_internal_topic_partitions",
            "Partitions of convmon's own topics (CONVMON_TOPIC_PARTITIONS): re-keyed events, judge, scores, "
            "labels, dead letters and the state changelogs.",
            registry=r,
        )
        self.partition_lag = Gauge(
            "convmon_consumer_partition_lag_messages",
            "Messages behind the log end, per partition this worker owns (removed when it loses the partition).",
            ["topic", "partition"],
            registry=r,
        )
        # --- process memory (runtime/allocator.py): the live heap, without the freed pages RSS also counts ----
        self.heap_allocated = Gauge(
            "convmon_process_heap_allocated_bytes",
            "Bytes this process holds from malloc now, read from its allocator on every scrape (jemalloc's "
            "stats.allocated; glibc's mallinfo2 uordblks + hblkhd); absent under another malloc. Python's small "
            "objects live in pymalloc arenas, not counted here: see convmon_process_python_allocated_blocks.",
            ["allocator"],
            registry=r,
        )
        self.python_blocks = Gauge(
            "convmon_process_python_allocated_blocks",
            "Memory blocks the interpreter holds now (sys.getallocatedblocks: pymalloc's small objects and more), "
            "read on every scrape: grows with a leak of Python objects, which the heap gauge does not count.",
            registry=r,
        )
        self.anon_memory = Gauge(
            "convmon_process_anon_memory_bytes",
            "Anonymous resident memory (RssAnon in /proc/self/status), read on every scrape: the malloc heap and "
            "Python's object arenas (which convmon_process_heap_allocated_bytes does not see), plus freed pages an "
            "allocator still holds; without the shared libraries' file pages that RSS also counts.",
            registry=r,
        )
        self.partition_position = Gauge(
            "convmon_consumer_partition_position",
            "The next offset this worker reads, per partition it owns: flat while lag > 0 means a stalled partition.",
            ["topic", "partition"],
            registry=r,
        )
