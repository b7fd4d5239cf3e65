"""The judged slice's terms of the corrected rate, counted with each judge verdict (docs/metrics.md).

The corrected (prediction-powered) rate of an item is the distilled mean over the conversations a model scored
it on plus the judged slice's mean residual, weighted by w = 1/pi: Prometheus computes it from these sums (group
``convmon-corrected-rates``). A judge record adds them for the items the distilled model scored the same
conversation on (judge-topic header ``convmon-distilled``); the partition totals count them, nothing else. The
judge/distilled agreement pairs are counted from the same header the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from monitor.contracts.scores import ScoreRecord, verdict_label

Series = tuple[str, tuple[str, ...]]  # (Metrics attribute, label values)


def residual_terms(score: ScoreRecord, shadow: Mapping[str, float], polarity: Mapping[str, str],
                   dims: tuple[str, ...], add: Callable[[Series, float], None]) -> None:
    """A judge record's terms of the prediction-powered rate (Angelopoulos et al., Science 2023), per item the
    distilled model also scored: the judge's yes y (1, else 0: the yes ratio the judge's rates read) and the
    distilled probability f, weighted by w = 1/pi and by q = w (w - 1), the weight of its Poisson-sampling
    variance. The recording rules add sum(w (y - f)) / sum(w) to the distilled mean (docs/metrics.md)."""
    w = score.sample_weight
    if w < 1.0:  # not 1/pi of a probability (a malformed weight header): q < 0 would make the counters go down
        return
    q = w * (w - 1.0)
    for item in score.items:
        f = shadow.get(item.item_id)
        item_polarity = polarity.get(item.item_id)
        if f is None or item_polarity is None:
            continue
        y = 1.0 if verdict_label("llm", item) == "yes" else 0.0
        labels = (item.item_id, item_polarity, *dims)
        add(("residual_weight", labels), w)
        add(("residual_yes", labels), w * y)
        add(("residual_probability", labels), w * f)
        add(("residual_design_weight", labels), q)
        add(("residual_design_yes", labels), q * y)
        add(("residual_design_probability", labels), q * f)
        add(("residual_design_squares", labels), q * (y - f) ** 2)


def agreement_pairs(score: ScoreRecord, shadow: Mapping[str, float], polarity: Mapping[str, str],
                    add: Callable[[Series, float], None]) -> None:
    """A judge record's judge/distilled pairs, per item the distilled model also scored on the same revision (the
    judge's yes or no, the distilled p >= 0.5): partition totals, so a later judged revision retracts them like
    the rates' counts (the totals' collector exports the other combinations at 0: ``agreement_siblings``)."""
    for item in score.items:
        f = shadow.get(item.item_id)
        verdict = verdict_label("llm", item)
        if f is None or item.item_id not in polarity or verdict == "uncertain":
            continue
        add(("agreement_pairs", (item.item_id, verdict, "yes" if f >= 0.5 else "no")), 1.0)
