"""Counted once, by the latest revision: a re-scored conversation's new revision retracts what the previous one
counted, in the same batch; a verdict of a superseded revision goes on the scores topic but is not counted."""

from __future__ import annotations

from monitor.contracts.metrics import RETRACTED
from monitor.contracts.score_codec import decode_score
from monitor.stages.sends import REVISION
from monitor.stages.totals import TotalsCollector
from tests.support.hot_path import RUBRIC
from tests.support.revision_world import DSAT, World, end, first_and_reopened, turn


def test_the_latest_revision_counts_once_and_retracts_the_previous_in_the_same_batch() -> None:
    w = World()
    first, second = first_and_reopened(w)
    assert [decode_score(s.value, RUBRIC).revision for s in first.scores + second.scores] == [1, 2]
    assert dict(second.judge[0].headers)[REVISION] == b"2" and REVISION not in dict(first.judge[0].headers)
    assert [ok for _, ok in w.judged(first) + w.judged(second)] == [True, True]
    net = w.net()
    assert net[("scored", ("distilled",))] == 1 and net[("scored", ("llm",))] == 1
    # the distilled counts are revision 2's (4 turns: p = 0.8, yes), not revision 1's (p = 0.4, no)
    item = RUBRIC.items[0]
    assert net[("verdicts", (item.id, item.polarity, "distilled", "yes"))] == 1
    assert net[("verdicts", (item.id, item.polarity, "distilled", "no"))] == 0
    assert abs(net[("probability_sum", (item.id, item.polarity, "distilled"))] - 0.8) < 1e-9
    dsat = next(i for i in RUBRIC.items if i.id == DSAT)
    assert net[("verdicts", (DSAT, dsat.polarity, "llm", "yes"))] == 1  # the judge's verdict on revision 2


def test_a_verdict_for_a_superseded_revision_is_stored_but_not_counted() -> None:
    w = World()
    first, second = first_and_reopened(w)
    [(late, stored)] = [*w.judged(second), *w.judged(first)][1:]  # revision 2's verdict came first
    assert late.revision == 1 and stored  # goes on the scores topic ...
    dsat = next(i for i in RUBRIC.items if i.id == DSAT)
    net = w.net()
    # ... but not counted
    assert net[("scored", ("llm",))] == 1 and net[("verdicts", (DSAT, dsat.polarity, "llm", "yes"))] == 1
    assert w.metrics.registry.get_sample_value("convmon_superseded_scores_total", {"scorer": "llm"}) == 1


def test_a_revision_delivered_again_is_a_duplicate_not_a_second_retraction() -> None:
    w = World()
    _, second = first_and_reopened(w)
    record = decode_score(second.scores[0].value, RUBRIC)
    w.hot.count([record], {"c": 0}, now=3.0)  # the same revision's record again (a batch re-processed)
    assert w.net()[("scored", ("distilled",))] == 1
    assert w.metrics.registry.get_sample_value("convmon_duplicate_scores_total", {"scorer": "distilled"}) == 1


def test_the_ledger_survives_a_restore_so_a_later_revision_still_retracts() -> None:
    w = World()
    w.feed(turn(0), turn(1), end(2, []))
    again = World(w.counts, w.sessions)  # a new owner restores both stores
    again.feed(turn(2), turn(3), end(4, [DSAT]), now=2.0)
    assert again.net()[("scored", ("distilled",))] == 1


def test_every_series_is_exported_with_its_retraction_twin_from_zero() -> None:
    w = World()
    w.feed(turn(0), turn(1), end(2, []))
    w.totals.written()()
    collected = {f.name: f for f in TotalsCollector(w.totals, w.metrics, retracting=True).collect()}
    twins = [(s.name, s.labels, s.value) for s in collected["convmon_partition_conversations_scored_retracted"].samples]
    assert twins == [("convmon_partition_conversations_scored_retracted_total",
                      {"partition": "0", "scorer": "distilled"}, 0.0)]
    item = RUBRIC.items[0]
    verdicts = {(s.labels["verdict"], s.value) for s in collected["convmon_partition_rubric_verdicts_retracted"].samples
                if s.labels["rubric"] == item.id and s.labels["scorer"] == "distilled"}
    assert verdicts == {("yes", 0.0), ("no", 0.0)}
    off = {f.name for f in TotalsCollector(w.totals, w.metrics).collect() if f.samples}
    assert not any(name.endswith(RETRACTED) for name in off)  # reopening off: no twins
