from __future__ import annotations

import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from monitor.contracts.errors import ConfigError
from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricSet, load_rubric_set
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.contracts.settings import REPO_ROOT
from monitor.judge.reference import ConversationRef
from monitor.stages.export import DimensionLabels, Exporter, update_consumer_lag, update_partition_progress

DIMS = ["app", "locale", "model_version"]


@pytest.fixture
def rubric() -> RubricSet:
    return RubricSet.model_validate(
        {
            "id": "t",
            "version": "1",
            "items": [
                {"id": "sat.gratitude", "name": "G", "polarity": "sat", "description": "thanks"},
                {"id": "dsat.revision", "name": "R", "polarity": "dsat", "description": "rephrase"},
            ],
        }
    )


def make_score(scorer: str = "distilled", *, p: tuple[float | None, float | None] = (0.9, 0.2), **kw) -> ScoreRecord:
    if scorer == "distilled":
        items = [
            ItemResult(item_id="sat.gratitude", polarity="sat", probability=p[0]),
            ItemResult(item_id="dsat.revision", polarity="dsat", probability=p[1]),
        ]
    else:
        items = kw.pop("items", None) or [
            ItemResult(item_id="sat.gratitude", polarity="sat", verdict=True, score=8),
            ItemResult(item_id="dsat.revision", polarity="dsat", verdict=None, uncertain=True),
        ]
    fields = dict(
        conversation_id="c1", scorer=scorer, judge="x", rubric_set="t", rubric_version="1",
        model_version="m1", items=items, R=1.0, metadata={"app": "web", "locale": "en", "model_version": "g1"},
    )
    fields.update(kw)
    return ScoreRecord(**fields)


SAFE = r"[a-z][a-z0-9]{0,15}"  # these tests' values; the default (None) is the strict allow-list


def make_exporter(rubric: RubricSet, dims: list[str] = DIMS, cap: int = 3, **kw) -> tuple[Exporter, Metrics]:
    kw.setdefault("value_pattern", SAFE)
    metrics = Metrics(CollectorRegistry(), dimensions=tuple(dims))
    return Exporter(metrics, dimensions=dims, cap=cap, rubric=rubric, **kw), metrics


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_distilled_record_counts_verdicts_at_half_and_probability_sums(rubric: RubricSet) -> None:
    exporter, m = make_exporter(rubric)
    exporter.observe(make_score(p=(0.9, 0.2)))
    exporter.observe(make_score(p=(0.5, 0.4), conversation_id="c2"))
    d = {"app": "web", "locale": "en", "model_version": "g1"}
    assert sample(m, "convmon_conversations_scored_total", scorer="distilled", **d) == 2
    yes = dict(rubric="sat.gratitude", polarity="sat", scorer="distilled", verdict="yes", **d)
    assert sample(m, "convmon_rubric_verdicts_total", **yes) == 2  # 0.5 counts as yes
    no = dict(rubric="dsat.revision", polarity="dsat", scorer="distilled", verdict="no", **d)
    assert sample(m, "convmon_rubric_verdicts_total", **no) == 2
    psum = sample(m, "convmon_rubric_probability_sum_total", rubric="dsat.revision", polarity="dsat",
                  scorer="distilled", **d)
    assert psum == pytest.approx(0.6)
    assert sample(m, "convmon_satisfaction_r_count", scorer="distilled") == 2
    assert sample(m, "convmon_satisfaction_r_bucket", scorer="distilled", le="2.0") == 2


def test_llm_record_counts_yes_no_uncertain(rubric: RubricSet) -> None:
    exporter, m = make_exporter(rubric)
    exporter.observe(make_score("llm", satisfaction=0.75))
    d = {"app": "web", "locale": "en", "model_version": "g1"}
    assert sample(m, "convmon_rubric_verdicts_total", rubric="sat.gratitude", polarity="sat", scorer="llm",
                  verdict="yes", **d) == 1
    assert sample(m, "convmon_rubric_verdicts_total", rubric="dsat.revision", polarity="dsat", scorer="llm",
                  verdict="uncertain", **d) == 1
    # uncertain contributes 0.5 to the expected-rate sum so every record adds one term per item
    assert sample(m, "convmon_rubric_probability_sum_total", rubric="dsat.revision", polarity="dsat",
                  scorer="llm", **d) == 0.5
    assert sample(m, "convmon_satisfaction_probability_sum_total", scorer="llm", **d) == 0.75


def test_weighted_sums_use_the_routing_weight(rubric: RubricSet) -> None:
    exporter, m = make_exporter(rubric)
    exporter.observe(make_score(p=(1.0, 0.5), sample_weight=4.0))
    assert sample(m, "convmon_conversations_scored_weight_total", scorer="distilled") == 4.0
    assert sample(m, "convmon_rubric_weighted_probability_sum_total", rubric="dsat.revision", polarity="dsat",
                  scorer="distilled") == 2.0


def test_dimension_cap_overflows_to_other(rubric: RubricSet) -> None:
    exporter, m = make_exporter(rubric, cap=2)
    for app in ("a", "b", "c", "d"):
        exporter.observe(make_score(metadata={"app": app, "locale": "en"}))
    base = {"scorer": "distilled", "locale": "en", "model_version": "unknown"}
    assert sample(m, "convmon_conversations_scored_total", app="a", **base) == 1
    assert sample(m, "convmon_conversations_scored_total", app="b", **base) == 1
    assert sample(m, "convmon_conversations_scored_total", app="c", **base) is None
    assert sample(m, "convmon_conversations_scored_total", app="other", **base) == 2
    assert sample(m, "convmon_dimension_overflow_total", dimension="app") == 2
    assert sample(m, "convmon_dimension_overflow_total", dimension="locale") == 0


def test_allowed_values_are_kept_even_when_they_arrive_late() -> None:
    labels = DimensionLabels(["app"], cap=2, allowed={"app": ["prod"]}, pattern=SAFE)
    assert labels.values({"app": "x"}) == (("x",), [])
    assert labels.values({"app": "y"}) == (("other",), ["app"])
    assert labels.values({"app": "prod"}) == (("prod",), [])
    assert labels.values({}) == (("unknown",), [])


def test_long_values_are_truncated_to_keep_labels_small() -> None:
    labels = DimensionLabels(["app"], cap=5, pattern="x+")
    (value,), _ = labels.values({"app": "x" * 500})
    assert len(value) == 64


def test_unknown_items_are_skipped_not_exported(rubric: RubricSet) -> None:
    exporter, m = make_exporter(rubric)
    items = [ItemResult(item_id="dsat.made_up", polarity="dsat", probability=0.9)]
    exporter.observe(make_score(items=items, scorer="llm"))
    assert sample(m, "convmon_export_skipped_items_total", reason="unknown_item") == 1
    names = {s.labels.get("rubric") for f in m.registry.collect() for s in f.samples}
    assert "dsat.made_up" not in names


def test_no_dimensions_initialises_every_item_at_zero(rubric: RubricSet) -> None:
    exporter, m = make_exporter(rubric, dims=[])
    assert sample(m, "convmon_rubric_verdicts_total", rubric="dsat.revision", polarity="dsat", scorer="llm",
                  verdict="yes") == 0
    exporter.observe(make_score(metadata={"app": "web"}))
    assert sample(m, "convmon_conversations_scored_total", scorer="distilled") == 1


def test_mismatched_dimensions_are_refused(rubric: RubricSet) -> None:
    metrics = Metrics(CollectorRegistry(), dimensions=("app",))
    with pytest.raises(ConfigError, match=r"must equal the ones the metrics were declared with \['app'\]"):
        Exporter(metrics, dimensions=["locale"], cap=3, rubric=rubric)


def test_bad_cap_and_unknown_allowed_dimension_are_refused() -> None:
    with pytest.raises(ConfigError, match="cap must be an integer >= 1. Got 0 instead"):
        DimensionLabels(["app"], cap=0)
    with pytest.raises(ConfigError, match=r"names \['lang'\], which are not in metric_dimensions"):
        DimensionLabels(["app"], cap=3, allowed={"lang": ["en"]})


def test_consumer_lag_gauge_per_topic_and_never_negative(rubric: RubricSet) -> None:
    _, m = make_exporter(rubric)
    update_consumer_lag(m, "convmon.scores", 42)
    update_consumer_lag(m, "convmon.events", -3)
    assert sample(m, "convmon_consumer_lag_messages", topic="convmon.scores") == 42
    assert sample(m, "convmon_consumer_lag_messages", topic="convmon.events") == 0


def test_default_rubric_set_exports_every_item() -> None:
    rubric = load_rubric_set("spur-copilot", REPO_ROOT / "prompts")
    exporter, m = make_exporter(rubric)
    items = [ItemResult(item_id=i.id, polarity=i.polarity, probability=0.7) for i in rubric.items]
    exporter.observe(make_score(items=items, scorer="distilled"))
    got = {s.labels["rubric"] for f in m.registry.collect() if f.name == "convmon_rubric_verdicts"
           for s in f.samples if s.name.endswith("_total")}
    assert got == set(rubric.item_ids)


def test_score_delay_from_the_conversation_end(rubric: RubricSet) -> None:
    exporter, m = make_exporter(rubric)
    exporter.observe(make_score(ended_at=time.time() - 42.0))
    exporter.observe(make_score("llm", conversation_id="c2", ended_at=time.time() + 30))  # producer clock ahead
    exporter.observe(make_score(conversation_id="c3"))  # no end time: not observed
    assert sample(m, "convmon_score_delay_seconds_count", scorer="distilled") == 1
    assert sample(m, "convmon_score_delay_seconds_bucket", scorer="distilled", le="30.0") == 0
    assert sample(m, "convmon_score_delay_seconds_bucket", scorer="distilled", le="60.0") == 1
    assert sample(m, "convmon_score_delay_seconds_sum", scorer="llm") == 0.0


def test_partition_progress_drops_the_series_of_lost_partitions() -> None:
    m = Metrics(CollectorRegistry())
    owned = update_partition_progress(m, {("ev", 0): (5, 100), ("ev", 1): (0, 7)}, set())
    assert sample(m, "convmon_consumer_partition_lag_messages", topic="ev", partition="0") == 5
    assert sample(m, "convmon_consumer_partition_position", topic="ev", partition="1") == 7
    owned = update_partition_progress(m, {("ev", 1): (-3, 9)}, owned)  # partition 0 went to another worker
    assert owned == {("ev", 1)}
    assert sample(m, "convmon_consumer_partition_lag_messages", topic="ev", partition="0") is None
    assert sample(m, "convmon_consumer_partition_position", topic="ev", partition="0") is None
    assert sample(m, "convmon_consumer_partition_lag_messages", topic="ev", partition="1") == 0


def dimensioned_series(metrics: Metrics) -> int:
    return sum(1 for family in metrics.registry.collect() for s in family.samples
               if "app" in s.labels and not s.name.endswith("_created"))


def test_a_flood_of_dimension_values_stays_within_the_global_series_budget(rubric: RubricSet) -> None:
    """20 values per dimension pass every per-dimension cap, but 20^3 combinations would not fit: past
    the budget, values fold into "other" (counted per dimension) and every record is still counted."""
    exporter, metrics = make_exporter(rubric, cap=20, series_budget=1000)
    limit = 1000 // (2 * (3 + 4 * len(rubric.items)))  # 45 label sets of 22 series each
    assert sample(metrics, "convmon_metric_label_sets_limit") == limit
    n = 0
    for i in range(20):
        for j in range(20):
            for k in range(0, 20, 3):
                meta = {"app": f"a{i}", "locale": f"l{j}", "model_version": f"v{k}"}
                for scorer in ("distilled", "llm"):
                    exporter.observe(make_score(scorer, metadata=meta))
                    n += 1
    assert dimensioned_series(metrics) <= 1000
    assert sample(metrics, "convmon_metric_label_sets") == exporter.labels.combinations <= limit
    folds = {d: sample(metrics, "convmon_metric_label_folds_total", dimension=d) for d in DIMS}
    assert folds["model_version"] >= folds["locale"] >= folds["app"] > 0
    scored = [s.value for f in metrics.registry.collect() for s in f.samples
              if s.name == "convmon_conversations_scored_total"]
    assert sum(scored) == n  # nothing dropped
    assert sample(metrics, "convmon_conversations_scored_total", scorer="llm", app="other", locale="other",
                  model_version="other") > 0


def test_folding_keeps_the_leading_dimensions_when_that_label_set_exists(rubric: RubricSet) -> None:
    labels = DimensionLabels(DIMS, cap=20, pattern=SAFE)
    labels.set_budget(4)  # three label sets, and one kept for all-other
    for admitted in (("web", "en", "g1"), ("web", "en", "g2"), ("web", "en", "other")):
        assert labels.within_budget(admitted) == (admitted, [])
    assert labels.within_budget(("web", "en", "g3")) == (("web", "en", "other"), ["model_version"])
    everything = ["app", "locale", "model_version"]
    assert labels.within_budget(("web", "fr", "g1")) == (("other", "other", "other"), everything)
    assert labels.within_budget(("web", "en", "g2")) == (("web", "en", "g2"), [])  # admitted ones stay
    assert labels.combinations == 4
    with pytest.raises(ConfigError, match="CONVMON_METRIC_SERIES_BUDGET"):
        make_exporter(rubric, series_budget=10)


PLANTED = {"app": "dave@example.net", "locale": "+1 415 555 0100", "model_version": "4111 1111 1111 1111"}


def test_by_default_only_configured_values_become_labels(rubric: RubricSet) -> None:
    """Metadata is producer-supplied; a value nobody listed is 'other', never a label."""
    exporter, m = make_exporter(rubric, value_pattern=None, allowed_values={"app": ["web"]})
    exporter.observe(make_score(metadata={"app": "web", "locale": "en"}))
    exporter.observe(make_score(metadata=PLANTED))
    assert sample(m, "convmon_conversations_scored_total", scorer="distilled", app="web", locale="other",
                  model_version="unknown") == 1
    assert sample(m, "convmon_conversations_scored_total", scorer="distilled", app="other", locale="other",
                  model_version="other") == 1
    assert sample(m, "convmon_dimension_overflow_total", dimension="app") == 1  # unlisted values show
    text = generate_latest(m.registry).decode()
    assert all(v not in text for v in PLANTED.values()) and "4111" not in text


def test_a_safe_pattern_keeps_matching_values_and_folds_personal_data(rubric: RubricSet) -> None:
    exporter, m = make_exporter(rubric, value_pattern=r"[a-z][a-z0-9._-]{0,31}")
    exporter.observe(make_score(metadata=PLANTED))
    exporter.observe(make_score(metadata={"app": "web", "locale": "en-gb", "model_version": "gpt-4o"}))
    text = generate_latest(m.registry).decode()
    assert 'app="web"' in text and 'model_version="gpt-4o"' in text
    assert all(v not in text for v in PLANTED.values())


def test_a_bad_value_pattern_is_refused(rubric: RubricSet) -> None:
    with pytest.raises(ConfigError, match="CONVMON_DIMENSION_VALUE_PATTERN"):
        DimensionLabels(["app"], cap=3, pattern="(")


def test_exemplars_carry_an_opaque_reference_never_the_conversation_id(rubric: RubricSet) -> None:
    ref = ConversationRef(b"0123456789abcdef0123456789abcdef")
    exporter, m = make_exporter(rubric, reference=ref)
    exporter.observe(make_score("llm", conversation_id="dave@example.net", span="ab" * 16 + "-" + "cd" * 8))
    text = generate_latest(m.registry).decode()  # the exposition may omit exemplars: read them from the samples
    exemplars = [s.exemplar for f in m.registry.collect() for s in f.samples if s.exemplar is not None]
    assert exemplars and all(e.labels["conversation_ref"] == ref("dave@example.net") for e in exemplars)
    assert all("dave" not in str(e.labels) for e in exemplars) and "dave" not in text
    assert ref("dave@example.net") == ConversationRef(b"0123456789abcdef0123456789abcdef")("dave@example.net")
    assert ref("dave@example.net") != ConversationRef(b"x" * 32)("dave@example.net")


def test_a_record_s_reference_is_computed_once_for_all_its_yes_verdicts(rubric: RubricSet) -> None:
    """The keyed hash is per record, not per "yes" verdict (hot-path CPU); each record's exemplars are its own."""
    ref = ConversationRef(b"0123456789abcdef0123456789abcdef")
    calls: list[str] = []

    def counting(cid: str) -> str:
        calls.append(cid)
        return ref(cid)

    exporter, m = make_exporter(rubric, reference=counting)
    both_yes = [ItemResult(item_id="sat.gratitude", polarity="sat", verdict=True, score=8),
                ItemResult(item_id="dsat.revision", polarity="dsat", verdict=True, score=6)]
    exporter.observe_batch([make_score("llm", conversation_id=cid, items=list(both_yes)) for cid in ("a", "b")])
    exemplars = [s.exemplar for f in m.registry.collect() for s in f.samples if s.exemplar is not None]
    assert calls == ["a", "b"] and len(exemplars) == 2  # two "yes" series, one hash per record
    assert all(e.labels["conversation_ref"] == ref("b") for e in exemplars)  # the last "yes" of each series
