"""A local model's server as the judge, end to end: the real broker, a real worker process, real HTTP.

The judge endpoint refuses ``json_schema`` exactly as llama-cpp-python's server does (HTTP 500 naming 'text' or
'json_object') and, when nothing constrains it, fences its JSON as instruction-tuned models do. At sample rate 1.0
every one of 40 conversations must be judged with the default strict reading; the score records on the scores
topic and the score store's rows must name the judge that made them.
"""

from __future__ import annotations

import asyncio

import orjson
import pytest
import sqlalchemy as sa

from monitor import __version__
from monitor.contracts.rubric_set import load_rubric_set
from monitor.runtime.broker import ensure_topics
from monitor.runtime.clients import topic_names
from monitor.runtime.scrape import by_label, total
from monitor.tools.openai_server import OpenAIServer
from monitor.tools.simulator.generate import ConversationGenerator
from tests.support.model_fixtures import publish_distilled_model
from tests.support.readback import read_to_end
from tests.support.topic_io import produce
from tests.support.workers import WorkerProcess, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
N = 40


def test_every_conversation_is_judged_through_json_object_and_names_its_judge(broker: str, make_settings,
                                                                                tmp_path) -> None:
    server = OpenAIServer(default="llama_cpp_python", fence_free_text=True).start()
    settings = make_settings(broker_url=f"kafka://{broker}", sample_rate=1.0, idle_timeout_s=3.0,
                             registry_poll_s=1.0, score_store=True, openai_base_url=server.url,
                             openai_api_key="test", judge_concurrency=8,
                             # the stand-in has no limit; at the default 200,000 the sixteen refused json_schema
                             # calls keep their token estimates booked (OpenAI counts unsuccessful requests against
                             # its limits too) and the run waited 40 s for the bucket
                             judge_tokens_per_minute=1e9)
    rubric = load_rubric_set(settings.rubric_set, settings.prompts_dir)
    publish_distilled_model(settings, rubric)
    generator = ConversationGenerator(rubric, seed=51)
    records = [(f"local-{i}".encode(), orjson.dumps(event)) for i in range(N)
               for event in generator.generate(f"local-{i}", 1.7e9 + i).events]
    asyncio.run(ensure_topics(broker, topic_names(settings), settings.topic_partitions))
    try:
        with WorkerProcess(settings, tmp_path / "worker.log") as worker:
            produce(broker, settings.topic("events"), records)

            def judged() -> bool:
                s = worker.samples()
                return by_label(s, "convmon_conversations_scored_total", "scorer").get("llm", 0) >= N or bool(
                    total(s, "convmon_judge_nonresponse_total"))

            wait_until(judged, timeout=300, message="every conversation judged")
            with sa.create_engine(settings.label_store_url).connect() as conn:
                wait_until(lambda: conn.execute(sa.text(
                    "SELECT count(DISTINCT conversation_id) FROM convmon_score_items WHERE scorer = 'llm'"
                )).scalar_one() > 0, timeout=60, message="judge rows in the score store")
                stored = conn.execute(sa.text(
                    "SELECT DISTINCT evaluator FROM convmon_score_items WHERE scorer = 'llm'")).scalars().all()
            samples = worker.samples()
            assert worker.alive(), worker.log()
    finally:
        server.stop()

    assert by_label(samples, "convmon_conversations_scored_total", "scorer").get("llm") == N
    assert total(samples, "convmon_judge_nonresponse_total") == 0
    assert total(samples, "convmon_judge_answers_rejected_total") == 0
    level = [v for name, labels, v in samples if name == "convmon_judge_structured_fallback"]
    assert level == [2]  # json_object, remembered
    formats = [(body.get("response_format") or {}).get("type") for body in server.requests]
    assert formats.count("json_schema") == 2 * settings.judge_concurrency  # eight in flight, two schemas each
    assert formats.count("json_object") == N and len(formats) == N + 2 * settings.judge_concurrency

    scores = [orjson.loads(r.value) for r in read_to_end(broker, settings.topic("scores")).records]
    evaluators = {orjson.dumps(s["ev"], option=orjson.OPT_SORT_KEYS) for s in scores if s["scorer"] == "llm"}
    assert len(evaluators) == 1, evaluators
    evaluator = orjson.loads(evaluators.pop())
    assert evaluator == {"model": settings.judge_model, "endpoint": server.url, "prompt": evaluator["prompt"],
                         "rubric": rubric.key, "mode": "spur", "version": __version__}
    assert evaluator["prompt"].startswith("sha256:")
    assert [orjson.loads(s) if isinstance(s, str) else s for s in stored] == [evaluator]
    assert total(samples, "convmon_judge_provenance_changes_total") == 0
