"""The review link an alert carries, rendered by promtool from the shipped rules."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from monitor.contracts.settings import REPO_ROOT
from tests.review.stored import ITEM

RULES = REPO_ROOT / "deploy" / "prometheus" / "rules"


def rendered_alert_link(base: str, tmp_path: Path) -> str:
    """The ``review`` annotation of ConvmonJudgeHumanDisagreement for ITEM with `convmon ui` at ``base``, proven by
    `promtool test rules` (it fails unless the rule renders exactly this link)."""
    link = f"{base}/flagged?item={ITEM}&window=1h"
    series = {
        f'convmon_judge_human_agreement{{rubric="{ITEM}",bound="high"}}': "0.5x60",
        f'convmon_judge_human_labels{{rubric="{ITEM}"}}': "40x60",
        "convmon_judge_human_agreement_floor": "0.8x60", "convmon_judge_human_min_labels": "30x60",
        f'convmon_review_page_info{{url="{base}"}}': "1x60",
    }
    test = {"rule_files": [str(RULES / "convmon-recording.yml"), str(RULES / "convmon-alerts.yml")],
            "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": [{"series": k, "values": v} for k, v in series.items()],
                       "alert_rule_test": [{"eval_time": "45m", "alertname": "ConvmonJudgeHumanDisagreement",
                                            "exp_alerts": [{"exp_labels": {"severity": "ticket", "rubric": ITEM},
                                                            "exp_annotations": None}]}]}]}
    alerts = yaml.safe_load((RULES / "convmon-alerts.yml").read_text())
    rule = next(r for g in alerts["groups"] for r in g["rules"] if r.get("alert") == "ConvmonJudgeHumanDisagreement")
    annotations = {"summary": f"Reviewers disagree with the judge on {ITEM}", "review": link,
                   "description": rule["annotations"]["description"].replace("{{ $labels.rubric }}", ITEM)
                   .replace("{{ $value | humanizePercentage }}", "50%")}
    test["tests"][0]["alert_rule_test"][0]["exp_alerts"][0]["exp_annotations"] = annotations
    path = tmp_path / "link_test.yml"
    path.write_text(yaml.safe_dump(test))
    out = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return link
