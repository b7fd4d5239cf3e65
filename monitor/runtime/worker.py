"""`convmon worker`: one always-on process running every agent and serving /metrics."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import faust
from prometheus_client import start_http_server

from monitor.contracts.settings import Settings
from monitor.runtime.agents import register_agents, register_lag_timer
from monitor.runtime.app import create_app
from monitor.runtime.components import build_components
from monitor.runtime.retention import register_retention
from monitor.runtime.topics import create_topics
from monitor.runtime.wiring import build_pipeline

log = logging.getLogger(__name__)


def build_worker_app(settings: Settings) -> faust.App:
    pipeline = build_pipeline(settings)
    app, topics = create_app(settings)
    components = build_components(app, topics, pipeline)
    register_agents(app, topics, components)
    register_lag_timer(app, topics, components)
    register_retention(app, pipeline.store, settings.label_retention_days)
    return app


def run_worker(settings: Settings, *, loglevel: str = "warn",
               build: Callable[[Settings], faust.App] = build_worker_app) -> None:
    """Create missing topics (as `convmon topics create` does), build the app (``build``: the monitor, or a
    benchmark's variant), serve /metrics, run."""
    asyncio.run(create_topics(settings))
    app = build(settings)
    start_http_server(settings.metrics_port, addr=settings.metrics_host)
    log.warning("convmon worker: metrics on http://%s:%d/metrics", settings.metrics_host, settings.metrics_port)
    worker = faust.Worker(app, loglevel=loglevel, quiet=True)
    # faust's terminal spinner sets the root logger to DEBUG so it can spin on every record: every
    # debug call in aiokafka and faust then builds a LogRecord (about 5% of a busy worker's CPU).
    worker.spinner = None
    worker.execute_from_commandline()
