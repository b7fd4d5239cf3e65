"""End to end: a worker with the stand-in judge scores 30 conversations; the link the alert's annotation renders
opens the page listing the judged-DSAT conversations with the judge's reasons; a reviewer labels 10 of them in a
real browser; `convmon ui`'s /metrics then carries the agreement statistics those 10 labels give."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
import orjson
import pytest
import sqlalchemy as sa

from monitor.judge.reference import ConversationRef
from monitor.runtime.broker import ensure_topics
from monitor.runtime.clients import topic_names
from monitor.runtime.scrape import by_label
from monitor.tools.openai_server import OpenAIServer
from tests.review.browser import chromium, review_page, wait_for
from tests.review.links import rendered_alert_link
from tests.review.stored import ITEM, KEY
from tests.support.topic_io import produce
from tests.support.workers import WorkerProcess, wait_until

pytestmark = pytest.mark.integration
N = 30


def events(k: int) -> list[dict[str, object]]:
    cid = f"person{k}@example.com"
    last = "that's wrong and useless, write to me at " + cid if k < N // 2 else "thanks, that worked"
    turns = [("user", "How do I reset my password?"), ("assistant", "Open Settings, then Security."), ("user", last)]
    out: list[dict[str, object]] = [
        {"type": "turn", "conversation_id": cid, "turn_index": i, "role": role, "text": text,
         "metadata": {"app": "web"}} for i, (role, text) in enumerate(turns)]
    return [*out, {"type": "end", "conversation_id": cid, "turn_count": len(turns)}]


def label(browser: object, base: str, ref: str, answer: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get(f"{base}/c/{ref}")  # type: ignore[attr-defined]
    Select(browser.find_element(By.NAME, f"item:{ITEM}")).select_by_value(answer)  # type: ignore[attr-defined]
    browser.find_element(By.ID, "save").click()  # type: ignore[attr-defined]
    assert wait_for(browser, "saved").text == "Saved 1 labels."  # type: ignore[attr-defined]


@pytest.mark.timeout(400)
def test_worker_judge_page_review_metrics(broker: str, make_settings, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    server = OpenAIServer().start()  # the stand-in judge: "wrong", "useless" -> negative feedback, with a reason
    settings = make_settings(broker_url=f"kafka://{broker}", sample_rate=1.0, idle_timeout_s=3.0,
                             openai_base_url=server.url, openai_api_key="test", pii_reference_key=KEY)
    asyncio.run(ensure_topics(broker, topic_names(settings), settings.topic_partitions))
    try:
        with WorkerProcess(settings, tmp_path / "worker.log") as worker:
            produce(broker, settings.topic("events"),
                    [(str(e["conversation_id"]).encode(), orjson.dumps(e)) for k in range(N) for e in events(k)])
            wait_until(lambda: by_label(worker.samples(), "convmon_conversations_scored_total", "scorer")
                       .get("llm", 0) >= N, timeout=150, message="30 judged conversations")
            engine = sa.create_engine(settings.label_store_url)
            reasons = sa.text("SELECT count(*) FROM convmon_score_items WHERE scorer = 'llm' AND item_id = :i "
                              "AND explanation IS NOT NULL")
            with engine.connect() as conn:
                wait_until(lambda: conn.execute(reasons, {"i": ITEM}).scalar_one() == N // 2, timeout=60,
                           message="the judge's DSAT verdicts stored with their reasons")
            engine.dispose()
    finally:
        server.stop()

    ref = ConversationRef(KEY.encode())
    env = {"CONVMON_LABEL_STORE_URL": settings.label_store_url, "CONVMON_PII_REFERENCE_KEY": KEY,
           "CONVMON_UI_LABELS": "true", "CONVMON_SAMPLE_RATE": "1.0", "CONVMON_REVIEW_BUDGET_PER_DAY": "1000",
           "CONVMON_REVIEW_UNFLAGGED_RATE": "1.0"}  # every judged conversation in the queue: pi = 1
    with review_page(env) as base:
        browser = chromium()
        try:
            browser.get(rendered_alert_link(base, tmp_path))  # type: ignore[attr-defined]
            rows = browser.find_elements(By.CSS_SELECTOR, "#flagged tr.row")  # type: ignore[attr-defined]
            assert len(rows) == N // 2 and all("the user wrote" in row.text for row in rows)
            assert "@example.com" not in browser.page_source  # type: ignore[attr-defined]
            shown = {row.find_element(By.CSS_SELECTOR, "a.open").text for row in rows}
            assert shown == {ref(f"person{k}@example.com") for k in range(N // 2)}
            # 6 flagged (judge yes): 2 disagree; 4 unflagged (judge no): 1 disagree
            plan = {0: "disagree", 1: "disagree", 2: "agree", 3: "agree", 4: "agree", 5: "agree",
                    15: "disagree", 16: "agree", 17: "agree", 18: "agree"}
            for k, answer in plan.items():
                label(browser, base, ref(f"person{k}@example.com"), answer)
        finally:
            browser.quit()  # type: ignore[attr-defined]
        metrics = httpx.get(f"{base}/metrics", timeout=10).text

    def value(name: str) -> float:
        found = re.search(rf'{name}{{bound="estimate",rubric="{ITEM}"}} (\S+)', metrics)
        assert found, f"{name} missing from /metrics:\n{metrics}"
        return float(found.group(1))

    assert f'convmon_judge_human_labels{{rubric="{ITEM}"}} 10.0' in metrics
    assert value("convmon_judge_human_agreement") == pytest.approx(7 / 10)
    assert value("convmon_judge_human_precision") == pytest.approx(4 / 6)
    assert value("convmon_judge_human_recall") == pytest.approx(4 / 5)
    assert value("convmon_judge_human_kappa") == pytest.approx((0.7 - 0.5) / 0.5)  # chance: .6*.5 + .4*.5
    assert value("convmon_judge_human_corrected_ratio") == pytest.approx((15 - 2 + 1) / 30)
