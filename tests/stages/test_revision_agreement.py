"""The agreement pairs and the corrected rate's terms count a re-judged conversation by its latest
judged revision: the pair of the revision it supersedes is retracted in the same batch, as the rates' counts are."""

from __future__ import annotations

from monitor.contracts.metrics import RESIDUAL_TERMS
from monitor.stages.totals import TotalsCollector
from tests.support.revision_world import DSAT, World, end, first_and_reopened, turn


def pairs(w: World, item: str) -> dict[tuple[str, str], float]:
    return {labels[1:]: value for (name, labels), value in w.net().items()
            if name == "agreement_pairs" and labels[0] == item}


def test_a_re_judged_conversation_counts_the_pair_of_its_latest_revision_only() -> None:
    w = World()
    first, second = first_and_reopened(w)  # revision 1: 2 turns (p = 0.4), no DSAT; revision 2: 4 turns, DSAT
    w.judged(first)
    assert pairs(w, DSAT) == {("no", "no"): 1}  # the judge said no, the distilled p 0.4
    w.judged(second)
    assert pairs(w, DSAT) == {("yes", "yes"): 1}  # revision 2's pair (p 0.8), revision 1's retracted
    residuals = {name for (name, labels) in w.net() if name in RESIDUAL_TERMS and labels[0] == DSAT}
    assert abs(w.net()[("residual_weight", (DSAT, "dsat"))] - 1.0) < 1e-9 and "residual_yes" in residuals
    assert abs(w.net()[("residual_probability", (DSAT, "dsat"))] - 0.8) < 1e-9  # revision 2's f, not 0.4 + 0.8


def test_every_pair_series_is_born_at_zero_and_a_superseded_verdict_adds_no_pair() -> None:
    w = World()
    w.judged(w.feed(turn(0), turn(1), end(2, [])))
    w.totals.written()()
    for retracting, name in ((False, "convmon_partition_agreement_pairs"),
                             (True, "convmon_partition_agreement_pairs_retracted")):
        [family] = [f for f in TotalsCollector(w.totals, w.metrics, retracting=retracting).collect() if f.name == name]
        exported = sorted((s.labels["judge"], s.labels["distilled"], s.value) for s in family.samples
                          if s.labels["rubric"] == DSAT)
        assert exported == [("no", "no", 0.0 if retracting else 1.0), ("no", "yes", 0.0), ("yes", "no", 0.0),
                            ("yes", "yes", 0.0)]
    w2 = World()
    first, second = first_and_reopened(w2)
    w2.judged(second)
    w2.judged(first)  # revision 1's verdict after revision 2's: stored, not counted
    assert pairs(w2, DSAT) == {("yes", "yes"): 1}
