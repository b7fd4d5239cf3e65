"""The OTLP-input row of `bench throughput`, on a tiny input against the tests' real broker."""

from __future__ import annotations

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from bench.doc_markdown import throughput_markdown
from bench.doc_tables import throughput_table
from bench.otlp_throughput import (
    END_ATTRIBUTE,
    OtlpThroughputConfig,
    otlp_messages,
    otlp_table,
    run_otlp_throughput,
)


def test_messages_are_unkeyed_batches_of_several_conversations_that_end() -> None:
    messages, ids = otlp_messages(7, 2, 3, "t")
    assert len(messages) == 3 and ids == [f"t-{i}" for i in range(7)]
    request = ExportTraceServiceRequest()
    request.ParseFromString(messages[0])
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    conversations = {kv.value.string_value for s in spans for kv in s.attributes if kv.key == "gen_ai.conversation.id"}
    assert conversations == {"t-0", "t-1", "t-2"}
    assert len(spans) == 3 * 2 * 2  # a GenAI span and its HTTP parent per call
    ended = [s for s in spans for kv in s.attributes if kv.key == END_ATTRIBUTE and kv.value.bool_value]
    assert len(ended) == 3  # the last call of each conversation


@pytest.mark.integration
def test_otlp_throughput_row(broker: str) -> None:
    config = OtlpThroughputConfig(conversations=40, per_message=10, warmup=10, partitions=2, train_labels=100,
                                  timeout_s=240.0)
    out = run_otlp_throughput(config, bootstrap=broker)
    print({k: v for k, v in out.items()})  # the numbers of a small run, in the test log
    assert out["messages"] == 4 and out["encoding"] == "otlp_proto"
    assert out["raw_consume_per_s"] > 0 and out["monitor_per_s"] > 0
    assert out["ratio"] == pytest.approx(out["monitor_per_s"] / out["raw_consume_per_s"])
    assert 0 < out["ratio"] < 1  # nothing beats a bare consumer reading the same bytes
    assert out["bytes_per_conversation"] > 1000
    assert throughput_table({"otlp": out}).row_count == 3  # bench throughput's JSON raw row, then the OTLP rows
    assert otlp_table({"otlp": out}).row_count == 2  # bench otlp-throughput
    text = throughput_markdown({"conversations": 1, "partitions": 2, "otlp": out})
    assert "OTLP traces input" in text and "raw aiokafka consume + OTLP protobuf parse" in text
    decode = out["decode"]  # bench otlp-decode rides along: its ratios and the sentence reporting them
    assert decode["otlp_proto_vs_json"] > 0 and decode["otlp_json_vs_json"] > 0
    assert f"({decode['otlp_proto_vs_json']}x)" in text and "Decode alone" in text
