"""In a real browser: open the review page from the link the alert's annotation renders (checked by promtool),
see the flagged conversations with the judge's reasons, open one (re-scored after its user came back: its
revisions show), label it, and find the label on /metrics."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from monitor.contracts.settings import REPO_ROOT
from tests.review.browser import chromium, review_page, wait_for
from tests.review.links import rendered_alert_link
from tests.review.stored import ITEM, KEY, store_judged, store_revisions

RULES = REPO_ROOT / "deploy" / "prometheus" / "rules"



@pytest.mark.integration
def test_from_the_alert_link_to_a_stored_label(tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    url = f"sqlite:///{tmp_path / 'labels.db'}"
    store_judged(url, 12)
    store_revisions(url, "user0@example.com", [{ITEM}, set()])  # the newest flagged one: the user came back
    env = {"CONVMON_LABEL_STORE_URL": url, "CONVMON_PII_REFERENCE_KEY": KEY, "CONVMON_UI_LABELS": "true"}
    with review_page(env) as base:
        link = rendered_alert_link(base, tmp_path)
        browser = chromium()
        try:
            browser.get(link)
            rows = browser.find_elements(By.CSS_SELECTOR, "#flagged tr.row")
            assert len(rows) == 6
            assert "the user complained about the answer, wrote [EMAIL]" in rows[0].text
            assert "@example.com" not in browser.page_source
            rows[0].find_element(By.CSS_SELECTOR, "a.open").click()
            assert browser.find_element(By.TAG_NAME, "h1").text.startswith("Conversation ref-")
            assert "this is wrong again, mail [EMAIL]" in browser.page_source
            revisions = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#revisions tr.revision")]
            assert [(r.split()[:2], r.endswith("counted (latest)"), ITEM in r) for r in revisions] == [
                (["1", "distilled"], False, True), (["1", "llm"], True, True),  # the judge saw revision 1 only
                (["2", "distilled"], True, False)]
            Select(browser.find_element(By.NAME, f"item:{ITEM}")).select_by_value("agree")
            browser.find_element(By.CSS_SELECTOR, "input[name=overall][value=dsat]").click()
            browser.find_element(By.ID, "save").click()
            assert wait_for(browser, "saved").text == "Saved 2 labels."  # type: ignore[attr-defined]
        finally:
            browser.quit()
        metrics = httpx.get(f"{base}/metrics", timeout=10).text
    assert f'convmon_judge_human_labels{{rubric="{ITEM}"}} 1.0' in metrics
    found = re.search(rf'convmon_judge_human_agreement{{bound="estimate",rubric="{ITEM}"}} (\S+)', metrics)
    assert found is not None and float(found.group(1)) == 1.0
