"""One redaction boundary: what the hot path sends on (re-key hop, judge topic, scores topic) and
keeps (the sessions) holds no planted value, in either setting of pii_raw_internal_topics for metadata."""

from __future__ import annotations

import orjson
from prometheus_client import CollectorRegistry

from monitor.contracts.events import TurnEvent
from monitor.contracts.metrics import Metrics
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.judge.redact import Redactor
from monitor.stages.boundary import InputRedaction, RedactingInput
from monitor.stages.dedup import DedupWindow
from monitor.stages.export import Exporter
from monitor.stages.hotpath import HotPath, Input, rekeyed_record
from monitor.stages.inputs import JsonInput
from monitor.stages.sessionize import Limits, Sessionizer
from monitor.stages.totals import PartitionTotals
from tests.support.hot_path import RUBRIC
from tests.support.memstore import MemStore

TEXT_PII = ["dave@example.net", "+44 20 7946 0958", "4111 1111 1111 1111", "DE89 3704 0044 0532 0130 00",
            "192.168.10.20"]
META_PII = {"app": "dave@example.net", "locale": "+1 415 555 0100", "model_version": "4111111111111111"}


def hot_path(*, text: bool) -> tuple[HotPath, MemStore]:
    metrics = Metrics(CollectorRegistry(), dimensions=("app",))
    store = MemStore()
    sessions = Sessionizer(store, Limits(), idle_timeout_s=10.0, closed_retention_s=60.0, allowed_lateness_s=2.0)
    counts = MemStore()
    totals = PartitionTotals(counts, metrics.partition_families)
    decoder = RedactingInput(JsonInput(10_000), InputRedaction(Redactor(), text=text))
    hot = HotPath(sessions, DedupWindow(counts, window_s=100.0, max_keys=1000), totals,
                  Exporter(metrics, dimensions=["app"], cap=5, rubric=RUBRIC), metrics, RUBRIC,
                  max_event_bytes=10_000, max_request_bytes=1 << 20, sample_rate=1.0, decoder=decoder)
    hot.assign({0, 1}, now=0.0)
    return hot, store


def turn(cid: str, i: int) -> bytes:
    return orjson.dumps({"conversation_id": cid, "turn_index": i, "role": "user", "timestamp": 1.0,
                         "text": f"reach me at {TEXT_PII[i % len(TEXT_PII)]} please", "metadata": META_PII})


def leaks(blob: bytes | str, values: list[str]) -> list[str]:
    text = blob.decode("utf-8", "replace") if isinstance(blob, bytes) else blob
    return [v for v in values if v in text]


def test_text_and_metadata_are_redacted_where_they_enter() -> None:
    hot, store = hot_path(text=True)
    unkeyed = hot.ingest([Input(None, turn("c", i), 0) for i in range(5)], now=1.0)
    pii = TEXT_PII + list(META_PII.values())
    assert len(unkeyed.rekey) == 5 and not any(leaks(s.value, pii) for s in unkeyed.rekey)
    keyed = hot.ingest([Input(s.key, s.value, 1, rekeyed=True) for s in unkeyed.rekey]
                       + [Input(b"c", orjson.dumps({"type": "end", "conversation_id": "c", "timestamp": 2.0}), 1)],
                       now=2.0)
    assert not leaks(repr(store.__dict__), TEXT_PII + list(META_PII.values()))  # the sessions (changelog) state
    (conversation, _), = keyed.closed
    assert "[EMAIL]" in conversation.turns[0].text and conversation.metadata["app"] == "[EMAIL]"
    sends = hot.judge_slice(keyed.closed, judge_accepting=True)
    assert len(sends) == 1 and not leaks(sends[0].value, TEXT_PII + list(META_PII.values()))
    record = ScoreRecord(conversation_id="c", scorer="distilled", judge="hashing", rubric_set=RUBRIC.id,
                         rubric_version=RUBRIC.version, model_version="m", R=0.0, metadata=conversation.metadata,
                         items=[ItemResult(item_id=i.id, polarity=i.polarity, probability=0.5) for i in RUBRIC.items])
    scores = hot.count([record], {"c": 1}, now=3.0)
    assert not leaks(scores[0].value, list(META_PII.values()))  # the scores topic (a public contract)


def test_raw_internal_topics_keep_text_but_never_metadata() -> None:
    hot, _ = hot_path(text=False)
    out = hot.ingest([Input(None, turn("c", 0), 0)], now=1.0)
    value = out.rekey[0].value
    assert len(out.rekey) == 1
    event = orjson.loads(value)
    assert TEXT_PII[0] in event["text"] and not leaks(orjson.dumps(event["metadata"]), list(META_PII.values()))


def test_an_event_with_nothing_to_redact_keeps_its_bytes() -> None:
    hot, _ = hot_path(text=True)
    raw = orjson.dumps({"conversation_id": "c", "turn_index": 0, "role": "user", "timestamp": 1.0, "text": "hello"})
    rekeyed = hot.ingest([Input(None, raw, 0)], now=1.0).rekey
    assert [(s.key, s.value) for s in rekeyed] == [(b"c", raw)]


def test_otlp_input_is_redacted_at_the_same_boundary() -> None:
    from monitor.contracts.settings import Settings
    from monitor.stages.inputs import build_input
    from monitor.tools.otel_traffic import Chat, GenAiApp

    settings = Settings(input_format="otlp_traces", otlp_encoding="otlp_proto", metric_dimensions=["app"])
    metrics = Metrics(CollectorRegistry(), dimensions=("app",))
    decoder = RedactingInput(build_input(settings.otel, settings.metrics, metrics, max_event_bytes=1 << 20),
                             InputRedaction(Redactor()))
    app = GenAiApp(service="dave@example.net")  # a service name is metadata (the app dimension)
    app.trace([Chat(f"k-{i}", [f"hi, {TEXT_PII[i]} is mine", "noted"]) for i in range(len(TEXT_PII))])
    decoded = decoder.decode(app.take_traces("otlp_proto"), rekeyed=False)
    assert decoded.events and decoded.problem is None
    texts = [e.text for e, _ in decoded.events if isinstance(e, TurnEvent)]
    assert sum("[EMAIL]" in t or "[CARD]" in t or "[IBAN]" in t or "[IP]" in t or "[PHONE]" in t for t in texts) == 5
    for event, raw in decoded.events:  # what the re-key hop sends: the redacted event's encoding (raw is None)
        assert not leaks(rekeyed_record(event, raw, None).value, TEXT_PII + ["dave@example.net"])
        assert event.metadata.get("app") == "[EMAIL]"
