"""Content by reference: spans recorded by the real OpenTelemetry SDK carrying ``gen_ai.*.messages_ref``, the
messages fetched from a real HTTP server (the content store), and every way a fetch can be refused."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from monitor.contracts.errors import ConfigError
from monitor.contracts.events import TurnEvent
from monitor.contracts.metrics import Metrics
from monitor.contracts.sections import OtelSettings
from monitor.contracts.settings import Settings
from monitor.stages.content_refs import HttpResolver, Unavailable, as_json_array, build_resolver
from monitor.stages.inputs import OtlpInput
from monitor.tools.otel_traffic import GenAiApp
from tests.support.content_store import ANSWER, HISTORY, TOKEN, Store, spans_by_reference


@pytest.fixture
def store() -> Any:
    s = Store()
    yield s
    s.stop()


def resolver(store: Store, **extra: Any) -> HttpResolver:
    options: dict[str, Any] = {"url_template": f"http://127.0.0.1:{store.port}/store/{{bucket}}/{{key}}",
                               "allowed_hosts": ["127.0.0.1"], "authorization": TOKEN, "timeout_s": 0.5,
                               "max_bytes": 4096, **extra}
    return HttpResolver(**options)


def test_fetch_outcomes_credentials_redirects_and_cache(store: Store) -> None:
    r = resolver(store, cache_size=1)
    got = r.fetch(["gs://bucket/c1/in.json", "gs://bucket/c1/out.jsonl", "gs://bucket/nope.json",
                   "gs://bucket/moved.json", "gs://bucket/slow.json", "gs://bucket/big.json",
                   "gs://bucket/../admin", "not a uri"])
    assert orjson.loads(got["gs://bucket/c1/in.json"]) == HISTORY  # type: ignore[arg-type]
    assert orjson.loads(got["gs://bucket/c1/out.jsonl"]) == ANSWER  # type: ignore[arg-type]  # JSON lines
    reasons = {ref: v.reason for ref, v in got.items() if isinstance(v, Unavailable)}
    assert reasons == {"gs://bucket/nope.json": "not_found", "gs://bucket/moved.json": "redirect",
                       "gs://bucket/slow.json": "timeout", "gs://bucket/big.json": "too_large",
                       "gs://bucket/../admin": "bad_reference", "not a uri": "bad_reference"}
    assert all(auth == TOKEN for _, auth in store.requests)  # credentials from settings, on every request
    assert ("/store/bucket/c1/in.json", TOKEN) in store.requests
    assert sum(p == "/store/bucket/c1/in.json" for p, _ in store.requests) == 1  # the redirect was not followed
    before = len(store.requests)
    r.fetch(["gs://bucket/c1/out.jsonl"])  # the last success: cached (the cache holds one)
    assert len(store.requests) == before
    r.fetch(["gs://bucket/c1/in.json"])  # pushed out of the one-entry cache: fetched again
    assert len(store.requests) == before + 1


def test_only_allowed_hosts_are_fetched(store: Store) -> None:
    r = resolver(store, url_template="http://{bucket}/{key}", allowed_hosts=["content.internal"])
    with pytest.raises(Unavailable) as err:
        r.url("gs://169.254.169.254/latest/meta-data")  # a span naming the cloud metadata service
    assert err.value.reason == "host_not_allowed"
    assert r.url("gs://content.internal/a/b.json") == "http://content.internal/a/b.json"
    assert store.requests == []
    assert as_json_array('{"role":"user"}\n\n{"role":"assistant"}\n') == '[{"role":"user"},{"role":"assistant"}]'


def otlp_input(store: Store, **extra: Any) -> tuple[OtlpInput, Metrics]:
    settings = Settings(input_format="otlp_traces", otlp_content_resolver="http",
                        otlp_content_url_template=f"http://127.0.0.1:{store.port}/store/{{bucket}}/{{key}}",
                        otlp_content_allowed_hosts=["127.0.0.1"], otlp_content_authorization=TOKEN,
                        otlp_content_timeout_s=0.5, **extra)
    metrics = Metrics(CollectorRegistry(), dimensions=tuple(settings.metric_dimensions))
    return OtlpInput(settings.otel, settings.metrics, metrics, max_event_bytes=1 << 22), metrics


def test_referenced_messages_become_the_same_turns_as_inline_ones(store: Store) -> None:
    decoder, metrics = otlp_input(store)
    app = GenAiApp()
    raw = spans_by_reference(app, [("c1", "gs://bucket/c1/in.json", "gs://bucket/c1/out.jsonl"),
                                   ("c2", "gs://bucket/c2/in.json", "gs://bucket/c2/out.json")])  # not stored
    decoded = decoder.decode(raw, rekeyed=False)
    turns = [e for e, _ in decoded.events if isinstance(e, TurnEvent)]
    assert [(t.conversation_id, t.turn_index, t.role, t.text) for t in turns] == [
        ("c1", 0, "user", "where is my parcel?"), ("c1", 1, "assistant", "It left the depot today.")]
    assert turns[1].span is not None  # the answer keeps its span: the judged span
    with app.tracer.start_as_current_span("chat gpt-4o-mini", attributes={  # the same call, content inline
            "gen_ai.conversation.id": "c1", "gen_ai.input.messages": orjson.dumps(HISTORY).decode(),
            "gen_ai.output.messages": orjson.dumps(ANSWER).decode()}):
        pass
    inline = [e for e, _ in decoder.decode(app.take_traces("otlp_proto"), rekeyed=False).events]
    assert [(t.turn_index, t.role, t.text) for t in inline] == [(t.turn_index, t.role, t.text) for t in turns]
    fetches = {s.labels["outcome"]: s.value for f in metrics.registry.collect()
               if f.name == "convmon_otlp_content_fetches" for s in f.samples if s.name.endswith("_total")}
    assert fetches == {"fetched": 1, "not_found": 1}
    records = {s.labels["outcome"]: s.value for f in metrics.registry.collect() if f.name == "convmon_otlp_records"
               for s in f.samples if s.name.endswith("_total")}
    assert records["content_unavailable"] == 1


class DictResolver:
    """A resolver of one's own, plugged in by its import path."""

    def __init__(self, otel: OtelSettings) -> None:
        self.otel = otel

    def fetch(self, refs: Sequence[str]) -> dict[str, str | Unavailable]:
        return {r: orjson.dumps(HISTORY if r.endswith("in") else ANSWER).decode() for r in refs}


def test_a_resolver_of_ones_own_plugs_in_and_settings_are_checked() -> None:
    otel = OtelSettings(otlp_content_resolver=f"{__name__}:DictResolver")
    assert isinstance(build_resolver(otel), DictResolver)
    with pytest.raises(ConfigError, match="cannot load"):
        build_resolver(OtelSettings(otlp_content_resolver="no_such_module_xyz:make"))
    with pytest.raises(ValidationError, match="otlp_content_url_template"):
        OtelSettings(otlp_content_resolver="http", otlp_content_allowed_hosts=["a"])
    with pytest.raises(ValidationError, match="otlp_content_allowed_hosts"):
        OtelSettings(otlp_content_resolver="http", otlp_content_url_template="https://x/{key}")
    with pytest.raises(ValidationError, match="package.module:factory"):
        OtelSettings(otlp_content_resolver="s3")
    assert build_resolver(OtelSettings()) is None
