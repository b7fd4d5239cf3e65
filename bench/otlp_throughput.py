"""The OTLP-input row of ``bench throughput``: conversations / s from ``otlp_proto`` batches, against raw consume.

The input is what the Collector's kafka exporter publishes: unkeyed ``ExportTraceServiceRequest``
messages, ``per_message`` conversations each, every call a GenAI span (repeating the history) under a
non-GenAI HTTP span, recorded by the real OpenTelemetry SDK (monitor/tools/otel_traffic.py). The last
call of each conversation carries the end attribute, so a conversation closes when its turns are in
rather than after the idle timeout (which would measure the timeout, not the work).

The raw row is a bare aiokafka consumer reading the same bytes and parsing each message with
``opentelemetry-proto`` (the physical limit: nothing the monitor does is faster). The monitor row is
a real worker process (``input_format=otlp_traces``, distilled ``hashing`` path, ``sample_rate=0``):
it decodes, re-keys each turn under its conversation id, sessionizes and scores; the row is timed
from the first message produced until every conversation has a distilled score. Both rows count
conversations / s (raw: messages / s x conversations per message).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer

from bench.throughput_paths import produce_timed, raw_consume_rate
from monitor.contracts.errors import ConfigError
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.settings import REPO_ROOT, KafkaSettings, Settings
from monitor.runtime.broker import EmbeddedBroker, ensure_topics, free_port, stop_process
from monitor.runtime.clients import topic_names
from monitor.runtime.scrape import wait_for_metrics

Progress = Callable[[str], None] | None
END_ATTRIBUTE = "app.conversation.ended"


@dataclass(frozen=True)
class OtlpThroughputConfig:
    conversations: int = 2000
    calls: int = 3  # assistant calls per conversation (two turns each)
    per_message: int = 25  # conversations per Kafka message, as the Collector batches them
    warmup: int = 50
    partitions: int = 4
    featurizer: str = "hashing"
    train_labels: int = 300
    timeout_s: float = 900.0
    seed: int = 0
    rubric: str = "spur-copilot"


def otlp_messages(n: int, calls: int, per_message: int, prefix: str) -> tuple[list[bytes], list[str]]:
    """``otlp_proto`` trace messages of ``n`` conversations, and their ids."""
    from monitor.tools.otel_traffic import Chat, GenAiApp, conversation_texts

    app = GenAiApp()
    messages: list[bytes] = []
    ids: list[str] = []
    try:
        for start in range(0, n, per_message):
            chats = [Chat(f"{prefix}-{i}", conversation_texts(calls, f"{prefix}{i}"), feedback={END_ATTRIBUTE: True})
                     for i in range(start, min(start + per_message, n))]
            app.trace(chats)
            messages.append(app.take_traces("otlp_proto"))
            ids += [c.conversation_id for c in chats]
    finally:
        app.shutdown()
    return messages, ids


def _parse_traces(raw: bytes) -> object:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    return ExportTraceServiceRequest().ParseFromString(raw)


def _unkeyed(messages: Sequence[bytes]) -> list[tuple[bytes | None, bytes]]:
    return [(None, m) for m in messages]


async def _scored(consumer: AIOKafkaConsumer, wanted: set[str], deadline: float) -> float:
    """Wait until every id in ``wanted`` has a distilled score; the perf_counter time the last one arrived."""
    last = time.perf_counter()
    while wanted:
        if time.monotonic() > deadline:
            raise ConfigError(f"timed out with {len(wanted)} OTLP conversations unscored; see the worker log")
        for records in (await consumer.getmany(timeout_ms=500, max_records=10_000)).values():
            for record in records:
                score = orjson.loads(record.value or b"{}")
                if score.get("scorer") == "distilled" and score.get("conversation_id") in wanted:
                    wanted.discard(score["conversation_id"])
                    last = time.perf_counter()
    return last


async def _drive(kafka: KafkaSettings, bootstrap: str, warmup: tuple[list[bytes], list[str]],
                 measured: tuple[list[bytes], list[str]], timeout_s: float, pid: int) -> dict[str, float]:
    from bench.throughput_paths import cpu_seconds

    consumer = AIOKafkaConsumer(kafka.topic("scores"), bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        deadline = time.monotonic() + timeout_s
        await produce_timed(bootstrap, kafka.topic("events"), _unkeyed(warmup[0]))  # model load, group join
        await _scored(consumer, set(warmup[1]), deadline)
        cpu0, started = cpu_seconds(pid), time.perf_counter()
        produce_s = await produce_timed(bootstrap, kafka.topic("events"), _unkeyed(measured[0]))
        finished = await _scored(consumer, set(measured[1]), deadline)
        cpu1 = cpu_seconds(pid)
    finally:
        await consumer.stop()
    out = {"monitor_per_s": len(measured[1]) / (finished - started), "produce_per_s": len(measured[1]) / produce_s}
    if cpu0 is not None and cpu1 is not None:
        out["worker_cpu_cores"] = (cpu1 - cpu0) / (finished - started)
    return out


def _worker_rate(settings: Settings, bootstrap: str, warmup: tuple[list[bytes], list[str]],
                 measured: tuple[list[bytes], list[str]], log_path: Path, timeout_s: float) -> dict[str, float]:
    from bench.throughput_paths import WORKER, peak_rss_mb, settings_env

    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVMON_")}
    env.update(settings_env(settings))
    env.setdefault("HF_HUB_OFFLINE", "1")
    with log_path.open("ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", *WORKER], env=env, stdout=log, stderr=subprocess.STDOUT,
                                cwd=str(REPO_ROOT))
    try:
        wait_for_metrics(f"http://127.0.0.1:{settings.metrics_port}/metrics", proc, log_path=log_path)
        out = asyncio.run(_drive(settings.kafka, bootstrap, warmup, measured, timeout_s, proc.pid))
        rss = peak_rss_mb(proc.pid)
        if rss is not None:
            out["peak_rss_mb"] = rss
        return out
    finally:
        stop_process(proc)


def run_otlp_throughput(config: OtlpThroughputConfig, progress: Progress = None, *,
                        bootstrap: str | None = None) -> dict[str, Any]:
    """Raw consume and monitor rates on the same ``otlp_proto`` messages; on ``bootstrap`` or an embedded broker."""
    import tempfile

    from bench.throughput_input import publish_model

    if progress:
        progress(f"OTLP: tracing {config.conversations} conversations with the OpenTelemetry SDK")
    warmup = otlp_messages(config.warmup, config.calls, config.per_message, f"otlp-warm-{config.seed}")
    measured = otlp_messages(config.conversations, config.calls, config.per_message, f"otlp-conv-{config.seed}")
    result: dict[str, Any] = {
        "conversations": config.conversations, "encoding": "otlp_proto", "calls_per_conversation": config.calls,
        "conversations_per_message": config.per_message, "messages": len(measured[0]),
        "bytes_per_conversation": sum(map(len, measured[0])) / config.conversations,
        "partitions": config.partitions, "featurizer": config.featurizer,
    }
    rubric = load_rubric_set(config.rubric, REPO_ROOT / "prompts")
    with tempfile.TemporaryDirectory(prefix="convmon-bench-otlp-") as tmp, ExitStack() as stack:
        if bootstrap is None:
            bootstrap = stack.enter_context(EmbeddedBroker()).bootstrap
        raw_topic = f"bench-otlp-{uuid.uuid4().hex[:8]}.raw"
        asyncio.run(ensure_topics(bootstrap, [raw_topic], config.partitions))
        if progress:
            progress(f"OTLP: raw consume of {len(measured[0])} messages")
        per_message = config.conversations / len(measured[0])
        result["raw_consume_per_s"] = asyncio.run(raw_consume_rate(bootstrap, raw_topic, _unkeyed(measured[0]),
                                                                   _parse_traces)) \
            * per_message
        unique = uuid.uuid4().hex[:8]
        settings = Settings(broker_url=f"kafka://{bootstrap}", app_id=f"bench-{unique}",
                            topic_prefix=f"b{unique}.", topic_partitions=config.partitions, sample_rate=0.0,
                            featurizer=config.featurizer, data_dir=Path(tmp),
                            model_registry=Path(tmp) / unique / "models",
                            label_store_url=f"sqlite:///{tmp}/{unique}.db", metrics_port=free_port(),
                            registry_poll_s=1.0, retrain_cron=None, input_format="otlp_traces",
                            otlp_encoding="otlp_proto", otlp_end_attribute=END_ATTRIBUTE)
        if progress:
            progress(f"OTLP: training {config.featurizer} on {config.train_labels} simulated labels")
        publish_model(settings.distill, rubric, config.featurizer, config.train_labels, config.seed)
        asyncio.run(ensure_topics(bootstrap, topic_names(settings), config.partitions))
        if progress:
            progress(f"OTLP: monitor worker over {config.conversations} conversations")
        result.update(_worker_rate(settings, bootstrap, warmup, measured, Path(tmp) / f"{unique}.log",
                                   config.timeout_s))
    result["ratio"] = result["monitor_per_s"] / result["raw_consume_per_s"]
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]  # the machine is shared: rates depend on it
    if progress:
        progress("OTLP: decode cost per conversation against the JSON path (bench otlp-decode)")
    from bench.otlp_decode import run_otlp_decode

    result["decode"] = run_otlp_decode(calls=config.calls, per_message=config.per_message)
    return result


def otlp_rows(otlp: dict[str, Any]) -> list[tuple[str, float, float | None]]:
    """(path, conversations / s, share of its raw consume) rows for the throughput table and document."""
    shape = f"{otlp['conversations_per_message']} conversations x {otlp['calls_per_conversation']} calls per message"
    return [(f"raw aiokafka consume + OTLP protobuf parse (otlp_proto, {shape})", otlp["raw_consume_per_s"], 1.0),
            (f"monitor end to end, OTLP traces input (otlp_proto, distilled `{otlp['featurizer']}`)",
             otlp["monitor_per_s"], otlp["ratio"])]


def with_otlp_row(result: dict[str, Any], otlp: bool, progress: Progress = None) -> dict[str, Any]:
    """``bench throughput``'s result with the OTLP row under ``otlp`` (same conversation count and partitions)."""
    if otlp:
        result["otlp"] = run_otlp_throughput(OtlpThroughputConfig(
            conversations=int(result.get("conversations") or OtlpThroughputConfig.conversations),
            partitions=int(result.get("partitions") or OtlpThroughputConfig.partitions)), progress)
    return result


def otlp_markdown(otlp: dict[str, Any], table: Callable[[list[str], list[list[str]]], str],
                  fmt: Callable[..., str]) -> str:
    """The OTLP section of docs/benchmarks.md's throughput part (``table`` and ``fmt`` are doc.py's)."""
    rows = [[path, fmt(rate), f"{100 * share:.2f} %"] for path, rate, share in otlp_rows(otlp) if share is not None]
    cores = otlp.get("worker_cpu_cores")
    return "\n".join([
        f"OTLP input: {otlp['conversations']} conversations traced by the OpenTelemetry SDK, published unkeyed as "
        f"`{otlp['encoding']}` `ExportTraceServiceRequest` messages ({otlp['conversations_per_message']} "
        f"conversations per message, {otlp['calls_per_conversation']} GenAI calls per conversation each repeating "
        f"the history, plus a non-GenAI HTTP span per call; {fmt(otlp['bytes_per_conversation'], 0)} bytes per "
        "conversation). The worker decodes them, re-keys each turn under its conversation id, sessionizes and "
        "scores; the raw row reads the same bytes with a bare consumer and parses them with opentelemetry-proto."
        + (f" Worker CPU: {fmt(cores, 2)} cores." if cores is not None else "")
        + (f" Load average (1 min) after the monitor row: {otlp['load_average'][0]:.1f}." if otlp.get("load_average")
           else ""), "",
        table(["path", "conversations / s", "share of raw (OTLP)"], rows), *_decode_markdown(otlp.get("decode"))])


def _decode_markdown(decode: dict[str, Any] | None) -> list[str]:
    """`bench otlp-decode`'s numbers (the target: OTLP decode at most 2x the JSON path's), when measured."""
    if not decode:
        return []
    load = decode.get("load_average")
    encodings = ", ".join(f"`{e}` {decode[f'{e}_us_per_conversation']} µs ({decode[f'{e}_vs_json']}x)"
                          for e in ("otlp_proto", "otlp_json"))
    return ["", f"Decode alone (`convmon bench otlp-decode`, CPU time per conversation, median of {decode['repeats']} "
            f"repetitions in which the paths take turns, {decode['conversations']} conversations"
            + (f", load average {load[0]:.1f}" if load else "")
            + f"): JSON events {decode['json_us_per_conversation']} µs, {encodings}; the bar is 2x: "
            + ("met." if decode["meets_bar"] else "not met.")]


def otlp_table(result: dict[str, Any]) -> Any:
    """``bench otlp-throughput``'s table: the two OTLP rows."""
    from rich.table import Table

    table = Table(title="OTLP input throughput (conversations / s)")
    for column in ("path", "per s", "vs raw consume (OTLP)"):
        table.add_column(column)
    for path, rate, share in otlp_rows(result["otlp"]):
        table.add_row(path, f"{rate:.1f}", f"{share:.3f}" if share is not None else "-")
    return table
