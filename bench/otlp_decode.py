"""`convmon bench otlp-decode`: OTLP input's decode cost per conversation against the JSON path's, same conversations.

The conversations are traced by the real OpenTelemetry SDK (monitor/tools/otel_traffic.py): one span per
assistant call, each repeating the history, ``per_message`` conversations per Kafka message as the
Collector batches them, plus the non-GenAI HTTP server span of each call. The JSON path decodes the same
conversations as convmon turn events (one message per turn). OTLP input also pays the re-key hop (the
decoded turns re-encoded as JSON and decoded again after the hop): reported as ``otlp_*_with_rekey``.
The bar: OTLP decode per conversation at most 2x the JSON path's, for both encodings. Every
number is the median of ``repeats`` repetitions in which the three paths take turns; ratios are per repetition.
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson
from prometheus_client import CollectorRegistry

from monitor.contracts.events import TurnEvent, decode_event, encode
from monitor.contracts.metrics import Metrics


def _cpu(fn: Callable[[], object]) -> float:
    """CPU time of one run: decoding is CPU-bound, and CPU time does not count the time other processes held
    the core (wall time did, on a shared machine)."""
    started = time.process_time()
    fn()
    return time.process_time() - started


def _each(decode: Callable[[bytes], object], raws: list[bytes]) -> None:
    for raw in raws:
        decode(raw)


def run_otlp_decode(*, conversations: int = 300, calls: int = 3, per_message: int = 25, repeats: int = 15
                    ) -> dict[str, Any]:
    from monitor.stages.genai import GenAiMapping
    from monitor.stages.otlp import OtlpDecoder
    from monitor.tools.otel_traffic import Chat, GenAiApp, conversation_texts

    app = GenAiApp()
    messages: dict[str, list[bytes]] = {"otlp_proto": [], "otlp_json": []}
    json_events: list[bytes] = []
    for start in range(0, conversations, per_message):
        chats = [Chat(f"bench-{i}", conversation_texts(calls, str(i)))
                 for i in range(start, min(start + per_message, conversations))]
        app.trace(chats)
        spans = app.spans.get_finished_spans()
        for encoding in messages:
            app.spans.clear()
            for span in spans:
                app.spans.export([span])
            messages[encoding].append(app.take_traces(encoding))  # type: ignore[arg-type]
        for chat in chats:
            for index, text in enumerate(chat.texts):
                json_events.append(orjson.dumps({"conversation_id": chat.conversation_id, "turn_index": index,
                                                 "role": "user" if index % 2 == 0 else "assistant", "text": text,
                                                 "timestamp": 1.7e9, "metadata": {"app": "chat-web"}}))
    app.shutdown()
    metrics = Metrics(CollectorRegistry())
    result: dict[str, Any] = {"conversations": conversations, "calls_per_conversation": calls,
                              "conversations_per_message": per_message, "repeats": repeats}
    decoders = {encoding: OtlpDecoder("traces", encoding, GenAiMapping(dimensions=("app",)), metrics,  # type: ignore[arg-type]
                                      max_event_bytes=1 << 26) for encoding in messages}
    # each decoded message is dropped before the next, as the hot path hands its events on: keeping them all
    # made the collector's passes over them (the JSON path decodes with it on) a fifth of the JSON path's time
    runs: dict[str, Callable[[], object]] = {"json": lambda: _each(decode_event, json_events)}
    rekeys: dict[str, Callable[[], object]] = {}
    for encoding, raws in messages.items():
        decoder = decoders[encoding]
        decoded = [decoder.decode(raw)[0] for raw in raws]
        turns = sum(len(d) for d in decoded)
        assert turns == conversations * 2 * calls, f"{encoding}: {turns} turns decoded"
        runs[encoding] = lambda d=decoder, r=raws: _each(d.decode, r)  # type: ignore[misc]
        rekeyed = [encode(e) for d in decoded for e in d if isinstance(e, TurnEvent)]
        rekeys[encoding] = lambda r=rekeyed, ds=decoded: ([encode(e) for d in ds for e in d],  # type: ignore[misc]
                                                          [decode_event(raw) for raw in r])
    # the paths take turns within each repetition and each repetition gives its own ratios: a neighbour's
    # burst slows the paths of one repetition alike, and the median ratio is robust to the rest. Each path
    # runs once untimed right before its timed run, so no path is timed on caches another path left behind.
    # The bench's own objects (messages, events, decoded turns) are frozen out of the cyclic GC: otherwise
    # a path that allocates with the collector on (the JSON path) pays for traversing them too.
    seconds: dict[str, list[float]] = {path: [] for path in runs}
    gc.collect()
    gc.freeze()
    try:
        for _ in range(repeats):
            for path, fn in runs.items():
                fn()
                seconds[path].append(_cpu(fn))
    finally:
        gc.unfreeze()
    ratios = {encoding: [o / j for o, j in zip(seconds[encoding], seconds["json"], strict=True)]
              for encoding in messages}
    result["json_us_per_conversation"] = round(statistics.median(seconds["json"]) / conversations * 1e6, 1)
    result["json_bytes_per_conversation"] = sum(map(len, json_events)) // conversations
    for encoding, raws in messages.items():
        rekey_s = statistics.median([_cpu(rekeys[encoding]) for _ in range(max(1, repeats // 3))])
        decode_s = statistics.median(seconds[encoding])
        result[f"{encoding}_us_per_conversation"] = round(decode_s / conversations * 1e6, 1)
        result[f"{encoding}_bytes_per_conversation"] = sum(map(len, raws)) // conversations
        result[f"{encoding}_vs_json"] = round(statistics.median(ratios[encoding]), 2)
        result[f"{encoding}_vs_json_range"] = [round(min(ratios[encoding]), 2), round(max(ratios[encoding]), 2)]
        result[f"{encoding}_with_rekey_us_per_conversation"] = round((decode_s + rekey_s) / conversations * 1e6, 1)
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    result["bar"] = "otlp_proto_vs_json <= 2 and otlp_json_vs_json <= 2 (median of the repetitions' ratios)"
    result["meets_bar"] = result["otlp_proto_vs_json"] <= 2.0 and result["otlp_json_vs_json"] <= 2.0
    return result
