"""`convmon ui` over a real SQLite label store, through Flask's test client: the flagged list with reasons, a
conversation's page, exports, the review queue's design, CSRF-protected label writes, access and raw ids."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from monitor.contracts.errors import ConfigError
from monitor.judge.reference import ConversationRef
from monitor.tools.review.app import create_app
from monitor.tools.review.data import ReviewData
from tests.review.stored import ITEM, KEY, RUBRIC, settings, store_judged, store_revisions

REF = ConversationRef(KEY.encode())


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'labels.db'}"
    store_judged(url, 10)
    return url


def client(url: str, **overrides: object) -> FlaskClient:
    return create_app(settings(url, **overrides)).test_client()


def csrf(page: bytes) -> str:
    found = re.search(rb'name="csrf" value="([^"]+)"', page)
    assert found, "no CSRF token on the page"
    return found.group(1).decode()


def test_the_flagged_list_shows_references_reasons_and_redacted_text(url: str) -> None:
    page = client(url).get(f"/flagged?item={ITEM}&window=1h")
    assert page.status_code == 200
    body = page.get_data(as_text=True)
    assert body.count('class="row"') == 5 and REF("user0@example.com") in body
    assert "the user complained about the answer, wrote [EMAIL]" in body and "this is wrong again" in body
    assert "@example.com" not in body
    assert client(url).get("/flagged?item=nope").status_code == 400
    assert client(url).get("/flagged?window=soon").status_code == 400
    assert 'class="row"' not in client(url).get(f"/flagged?item={ITEM}&scorer=distilled").get_data(as_text=True)
    assert client(url).get(f"/flagged?item={ITEM}&dimension=app=shop").get_data(as_text=True).count('class="row"') == 5
    assert client(url).get(f"/flagged?item={ITEM}&dimension=app=other").get_data(as_text=True).count(
        'class="row"') == 0


def test_exports_carry_references_never_raw_ids(url: str) -> None:
    rows = client(url).get(f"/flagged.json?item={ITEM}").get_json()
    assert len(rows) == 5 and all(r["conversation"].startswith("ref-") for r in rows)
    csv_text = client(url).get(f"/flagged.csv?item={ITEM}").get_data(as_text=True)
    assert csv_text.splitlines()[0].startswith("scored_at,conversation,item_id") and len(csv_text.splitlines()) == 6
    assert "@example.com" not in csv_text and "@example.com" not in str(rows)


def test_raw_ids_only_when_the_setting_opts_in(url: str) -> None:
    assert client(url).get("/c/user0@example.com").status_code == 404  # an id is no reference
    raw = client(url, ui_raw_ids=True)
    assert "user0@example.com" in raw.get("/flagged").get_data(as_text=True)
    assert raw.get("/c/user0@example.com").status_code == 200


def test_a_conversation_page_and_a_csrf_protected_review(url: str) -> None:
    ref = REF("user0@example.com")
    read_only = client(url)
    page = read_only.get(f"/c/{ref}")
    assert page.status_code == 200 and b"[EMAIL]" in page.data and b"@example.com" not in page.data
    assert b"Save labels" not in page.data
    assert read_only.post(f"/c/{ref}/review", data={"csrf": csrf(page.data)}).status_code == 403  # read-only
    writer = client(url, ui_labels=True)
    page = writer.get(f"/c/{ref}")
    assert b"Save labels" in page.data
    form = {f"item:{ITEM}": "disagree", "overall": "sat"}
    assert writer.post(f"/c/{ref}/review", data=form).status_code == 403  # no CSRF token
    assert writer.post(f"/c/{ref}/review", data={**form, "csrf": "forged"}).status_code == 403
    saved = writer.post(f"/c/{ref}/review", data={**form, "csrf": csrf(page.data)})
    assert saved.status_code == 302
    data = ReviewData(settings(url))
    labels = {h.item_id: h for h in data.humans.fetch(conversation_id="user0@example.com")}
    assert labels[ITEM].answer == "no" and labels[ITEM].judge_verdict is True  # disagreed with the judge's yes
    assert labels["overall"].answer == "sat" and labels[ITEM].inclusion_probability == pytest.approx(
        min(1.0, 50 / (5 / 7)))
    data.close()


def test_a_re_scored_conversation_shows_its_revisions_and_which_counts(url: str) -> None:
    other = next(i.id for i in RUBRIC.items if i.polarity == "dsat" and i.id != ITEM)
    store_revisions(url, "user1@example.com", [{ITEM}, {other}, set()])  # the user came back twice
    page = client(url).get(f"/c/{REF('user1@example.com')}").get_data(as_text=True)
    table = page[page.index('id="revisions"'):page.index("</table>", page.index('id="revisions"'))]
    rows = re.findall(r'<tr class="revision( counted)?">(.*?)</tr>', table, re.S)
    cells = [(counted, re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)) for counted, row in rows]
    assert [(c[0], c[1], bool(counted)) for counted, c in cells] == [
        ("1", "distilled", False), ("2", "distilled", False), ("3", "distilled", True)]
    assert ITEM in cells[0][1][3] and other in cells[1][1][3] and "none" in cells[2][1][3]
    assert [c[5] for _, c in cells] == ["superseded", "superseded", "counted (latest)"]
    assert "@example.com" not in page
    assert 'id="revisions"' not in client(url).get(f"/c/{REF('user0@example.com')}").get_data(as_text=True)


def test_the_queue_samples_by_design(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    store_judged(url, 400, flagged_every=4)
    data = ReviewData(settings(url, review_budget_per_day=5, review_unflagged_rate=0.1))
    judged = data.judged()
    flagged = [j for j in judged if j.flagged]
    assert len(flagged) == 100 and all(j.pi == pytest.approx(5 / (100 / 7)) for j in flagged)
    assert {j.pi for j in judged if not j.flagged} == {0.1}
    queue = data.queue()
    assert 15 <= sum(j.flagged for j in queue) <= 55 and 10 <= sum(not j.flagged for j in queue) <= 50
    assert [j.conversation_id for j in data.queue()] == [j.conversation_id for j in queue]  # the same each time
    data.close()


def test_a_token_guards_every_page_and_any_other_bind_needs_one(url: str) -> None:
    with pytest.raises(ConfigError, match="CONVMON_UI_TOKEN"):
        settings(url, ui_host="0.0.0.0")
    with pytest.raises(ConfigError, match="ui_token needs at least 16 characters"):
        settings(url, ui_token="short")
    with pytest.raises(ConfigError, match="must be an http:// or https:// address"):
        settings(url, ui_url="review.example.org")
    guarded = client(url, ui_host="0.0.0.0", ui_token="t" * 20)
    assert guarded.get("/flagged").status_code == 302
    assert guarded.get("/metrics").status_code == 401
    assert guarded.get("/metrics", headers={"Authorization": "Bearer " + "t" * 20}).status_code == 200
    assert guarded.post("/login", data={"token": "wrong"}).status_code == 401
    assert guarded.post("/login?next=/flagged", data={"token": "t" * 20}).headers["Location"] == "/flagged"
    assert guarded.get("/flagged").status_code == 200


def test_metrics_export_the_agreement_of_the_reviews(url: str) -> None:
    writer = client(url, ui_labels=True)
    for k in range(4):  # two flagged (agree, disagree), two unflagged (agree)
        ref = REF(f"user{k}@example.com")
        page = writer.get(f"/c/{ref}")
        answer = "disagree" if k == 2 else "agree"
        form = {f"item:{ITEM}": answer, "csrf": csrf(page.data)}
        assert writer.post(f"/c/{ref}/review", data=form).status_code == 302
    text = writer.get("/metrics").get_data(as_text=True)
    assert f'convmon_judge_human_labels{{rubric="{ITEM}"}} 4.0' in text
    assert 'convmon_judge_human_agreement_floor 0.8' in text and 'url="http://127.0.0.1:8050"' in text
    agreement = re.search(rf'convmon_judge_human_agreement{{bound="estimate",rubric="{ITEM}"}} (\S+)', text)
    # flagged reviews at pi = 1 (budget 50 a day > 5 flagged a week), unflagged at 0.02: weights 1 and 50
    assert agreement is not None and float(agreement.group(1)) == pytest.approx((1 + 50 + 50) / (1 + 50 + 1 + 50))
    assert b"Judge vs people" in writer.get("/agreement").data
