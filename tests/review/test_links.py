"""The Grafana panel link and the exemplar link of the shipped provisioning open real pages of `convmon ui`."""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml

from monitor.contracts.settings import REPO_ROOT
from monitor.judge.reference import ConversationRef
from monitor.tools.review.app import create_app
from tests.review.stored import ITEM, KEY, settings, store_judged

GRAFANA = REPO_ROOT / "deploy" / "grafana"


def test_panel_and_exemplar_links_open_the_item_and_the_conversation(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'labels.db'}"
    store_judged(url, 6)
    client = create_app(settings(url)).test_client()
    board = json.loads((GRAFANA / "dashboards" / "item-detail.json").read_text())
    links = [link["url"] for panel in board["panels"] for link in panel.get("links", [])
             if "${review_url}" in link["url"]]
    assert links, "no panel links to the review page"
    now_ms = int(time.time() * 1000)
    link = (links[0].replace("${review_url}", "").replace("${rubric}", ITEM)
            .replace("${__from}", str(now_ms - 3_600_000)).replace("${__to}", str(now_ms + 1000)))
    page = client.get(link)
    assert page.status_code == 200 and page.get_data(as_text=True).count('class="row"') == 3
    source = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "convmon.yml").read_text())
    prometheus = next(d for d in source["datasources"] if d["type"] == "prometheus")
    [destination] = prometheus["jsonData"]["exemplarTraceIdDestinations"]
    assert destination["name"] == "conversation_ref"  # the exemplar label the exporter sets
    path = destination["url"].removeprefix("http://127.0.0.1:8050").replace(
        "${__value.raw}", ConversationRef(KEY.encode())("user0@example.com"))
    assert client.get(path).status_code == 200
