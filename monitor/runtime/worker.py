"""`convmon worker`: one always-on process running the engine (monitor/engine) and serving /metrics."""

from __future__ import annotations

import asyncio
import gc
import logging
import sys

from prometheus_client import disable_created_metrics

from monitor.contracts.settings import Settings
from monitor.engine.worker import run_engine
from monitor.runtime.allocator import allocator_of
from monitor.runtime.endpoint import Endpoint, serve_endpoint
from monitor.runtime.health import Health
from monitor.runtime.layout import read_layout
from monitor.runtime.topics import create_topics
from monitor.runtime.wiring import build_pipeline
from monitor.stages.export import dimension_notice

LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"
GC_YOUNG_THRESHOLD = 50_000  # allocations between collections of the youngest generation (CPython's default: 700)
log = logging.getLogger(__name__)

NO_JUDGE = ("no judge endpoint (OPENAI_API_KEY / OPENAI_BASE_URL unset): only `convmon simulate` conversations are "
            "judged; the judge slice of other traffic is counted as "
            "convmon_conversations_routed_total{route=\"unjudged\"} (convmon_judge_configured 0), so no labels "
            "and no new distilled models come from it")


def start_lines(settings: Settings) -> list[str]:
    """What a worker says at start whatever the log level: configuration that changes what it will do."""
    dimensions = dimension_notice(settings.metric_dimensions, allowed=settings.dimension_values,
                                  pattern=settings.dimension_value_pattern, cap=settings.dimension_cap)
    return [dimensions] if settings.judge_configured else [dimensions, NO_JUDGE]


def run_worker(settings: Settings, *, loglevel: str = "warn") -> None:
    """Create missing topics (as `convmon topics create` does), read the input's partition count, serve
    /metrics, /healthz and /readyz, and run the engine until SIGTERM; exits with the engine's status."""
    logging.basicConfig(level=loglevel.upper(), format=f"[%(asctime)s] {LOG_FORMAT}")
    if settings.retrain_interval_s is not None:
        log.warning("CONVMON_RETRAIN_INTERVAL_S no longer makes workers retrain: run one `convmon retrain` per "
                    "deployment (it reads this setting as its interval; prefer CONVMON_RETRAIN_CRON)")
    # No `_created` series: a third of a counter-heavy exposition that no rule or dashboard reads, so a scrape
    # under load answers within a short scrape timeout (the demo's Prometheus scrapes every second).
    disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated
    asyncio.run(create_topics(settings.kafka))
    layout = asyncio.run(read_layout(settings.kafka))
    health = Health(settings.health_stall_s)
    pipeline = build_pipeline(settings)
    serve_endpoint(Endpoint(health), settings.metrics_host, settings.metrics_port)
    base = f"http://{settings.metrics_host}:{settings.metrics_port}"
    # The allocator decides whether RSS stays flat (runtime/allocator.py): the image preloads jemalloc.
    print(f"convmon worker {settings.app_id} on {settings.broker_url}: {base}/metrics, /healthz, /readyz "
          f"(malloc: {allocator_of()})", file=sys.stderr, flush=True)  # one start line whatever the log level
    for line in start_lines(settings):
        print(line, file=sys.stderr, flush=True)
    # What is built by now (modules, the pipeline) lives as long as the process: out of the cycle collector's
    # generations, so its full collections stop scanning it again for every few hundred records.
    gc.collect()
    gc.freeze()
    # The hot path allocates several objects per record, nearly all freed by reference counting; at the default
    # threshold (700) the young generation was collected every few records, 12 % of ingest's CPU (in process,
    # 4,000 USS conversations). Cycles still go: later, in bigger sweeps.
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    sys.exit(run_engine(settings, pipeline, layout, health))
