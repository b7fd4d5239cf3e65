"""The review page's settings section: where ``convmon ui`` listens, who may use it, and the review design."""

from __future__ import annotations

import ipaddress
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator


class ReviewSettings(BaseModel):
    """``convmon ui``: bind, access, the review queue's design and the agreement alert's floor."""

    model_config = ConfigDict(frozen=True)

    ui_host: str = Field(default="127.0.0.1", description=(
        "Address `convmon ui` binds. Anything but a loopback address needs CONVMON_UI_TOKEN (or an auth proxy in "
        "front that sets it: docs/review.md)."))
    ui_port: int = Field(default=8050, ge=1, le=65535, description="Port of `convmon ui` (the page and its /metrics).")
    ui_token: SecretStr | None = Field(default=None, description=(
        "Access token of `convmon ui`: sent as `Authorization: Bearer <token>` or entered once on its sign-in page "
        "(a session cookie then); at least 16 characters. Required when CONVMON_UI_HOST is not a loopback address."))
    ui_url: str = Field(default="http://127.0.0.1:8050", description=(
        "The page's address as people reach it: links from Grafana panels, exemplars and the alert annotation "
        "start with it (exported as convmon_review_page_info{url})."))
    ui_labels: bool = Field(default=False, description=(
        "Let reviewers label conversations on `convmon ui` (CSRF-protected POSTs into the label store). Off: the "
        "page is read-only."))
    ui_raw_ids: bool = Field(default=False, description=(
        "Show conversation ids as they came in, on pages, exports and URLs. Off: keyed references (ref-<hex> of "
        "CONVMON_PII_REFERENCE_KEY) everywhere; turn it on only for ids known to hold no personal data."))
    review_budget_per_day: float = Field(default=50.0, gt=0, description=(
        "Flagged conversations people are asked to review a day: each flagged judged conversation enters the "
        "queue with probability min(1, budget / flagged judged conversations a day over the last 7 days)."))
    review_unflagged_rate: float = Field(default=0.02, gt=0, le=1, description=(
        "Share of judged conversations the judge did not flag that enter the review queue (recall needs them)."))
    review_window_days: int = Field(default=30, ge=1, description=(
        "Human labels from this many days feed the agreement estimates; older ones are purged by `convmon ui`."))
    review_agreement_floor: float = Field(default=0.8, ge=0, le=1, description=(
        "ConvmonJudgeHumanDisagreement fires when an item's judge-vs-human agreement (upper 95 % bound) is below "
        "this (exported as convmon_judge_human_agreement_floor)."))
    review_min_labels: int = Field(default=30, ge=1, description=(
        "Reviewed conversations an item needs before the disagreement alert may fire (exported as "
        "convmon_judge_human_min_labels)."))

    @model_validator(mode="after")
    def _check_access(self) -> Self:
        if not self.ui_url.startswith(("http://", "https://")):
            raise ValueError(f"ui_url {self.ui_url!r} must be an http:// or https:// address")
        if self.ui_token is not None and len(self.ui_token.get_secret_value()) < 16:
            raise ValueError("ui_token needs at least 16 characters (a random string)")
        if self.ui_token is None and not is_loopback(self.ui_host):
            raise ValueError(f"ui_host {self.ui_host!r} is not a loopback address: set CONVMON_UI_TOKEN (or bind "
                             "127.0.0.1 behind your auth proxy)")
        return self


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
