"""Judge drift on one rubric item of the anchor set: its re-judging runs, paired anchor by anchor.

Two nonconformity scores, each its own :class:`ChangePointEProcess` at ``alpha / 2``:

- ``verdicts``: the newest verdict is the minority of the anchor's verdicts since the baseline (paired with
  the baseline runs: any change of the judge's answers, in either direction);
- ``humans``: the newest verdict disagrees with the anchor's human label (the judge moved away from people).

The item drifts when either reaches ``2 / alpha``; the summary says what moved: the share of "yes" and the
agreement with the human labels in the baseline run and in the latest one.

>>> import numpy as np
>>> rng = np.random.default_rng(1)
>>> human = rng.uniform(size=200) < 0.2
>>> runs = [np.where(rng.uniform(size=200) < 0.05, ~human, human).astype(float) for _ in range(30)]
>>> evaluate_item(np.array(runs), human.astype(float), np.random.default_rng(2).uniform(size=(30, 200))).drifted
False
>>> flipped = rng.uniform(size=200) < 0.15  # a new judge answers 15 % of the anchors the other way
>>> runs += [np.where(flipped, 1 - run, run) for run in runs[:3]]
>>> result = evaluate_item(np.array(runs), human.astype(float), np.random.default_rng(2).uniform(size=(33, 200)))
>>> result.drifted, result.detected_run, result.test
(True, 30, 'verdicts')
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from monitor.drift.exchangeability import ChangePointEProcess, conformal_pvalues, run_evalue


@dataclass(frozen=True)
class ItemDrift:
    """The verdict on one item after every run so far (``nan`` where a share has no anchors)."""

    evalue_verdicts: float
    evalue_humans: float
    drifted: bool
    detected_run: int | None  # index of the run at which it first drifted
    test: str | None  # "verdicts" or "humans": which one crossed first
    yes_baseline: float
    yes_latest: float
    human_agreement_baseline: float
    human_agreement_latest: float
    anchors_latest: int


def _share(values: np.ndarray) -> float:
    return float(np.mean(values)) if values.size else float("nan")


def evaluate_item(verdicts: np.ndarray, human: np.ndarray, theta: np.ndarray, *, alpha: float = 0.01,
                  spread: float = 2.5) -> ItemDrift:
    """Run both e-processes over ``verdicts`` (runs x anchors of 0/1, ``nan`` where an anchor was not judged).

    ``human`` holds each anchor's label (0/1, ``nan`` when unlabelled); ``theta`` (runs x anchors, uniform on
    (0, 1]) breaks ties in the conformal p-values. Run 0 is the baseline.
    """
    if verdicts.ndim != 2 or theta.shape != verdicts.shape or human.shape != verdicts.shape[1:]:
        raise ValueError(f"verdicts and theta must be runs x anchors and human one per anchor. "
                         f"Got {verdicts.shape}, {theta.shape} and {human.shape} instead.")
    judged = ~np.isnan(verdicts)
    ones = np.cumsum(np.where(judged, verdicts, 0.0), axis=0)
    counts = np.cumsum(judged, axis=0)
    disagree = np.cumsum(judged & ~np.isnan(human) & (verdicts != human), axis=0)
    processes = {"verdicts": ChangePointEProcess(alpha=alpha / 2), "humans": ChangePointEProcess(alpha=alpha / 2)}
    detected_run: int | None = None
    test: str | None = None
    for t in range(1, verdicts.shape[0]):
        now = judged[t] & (counts[t] >= 2)
        m, k1, v = counts[t][now], ones[t][now], verdicts[t][now].astype(bool)
        k0 = m - k1
        minority = np.where(v, k1 < k0, k0 < k1)  # a tie is nobody's minority
        p_v = conformal_pvalues(np.where(k1 != k0, np.minimum(k1, k0), 0), m, minority, theta[t][now])
        labelled = now & ~np.isnan(human)
        wrong = (verdicts[t] != human)[labelled]
        p_h = conformal_pvalues(disagree[t][labelled], counts[t][labelled], wrong, theta[t][labelled])
        processes["verdicts"].update(run_evalue(p_v, m, spread=spread))
        processes["humans"].update(run_evalue(p_h, counts[t][labelled], spread=spread))
        if detected_run is None:
            for name, process in processes.items():
                if process.drift_detected:
                    detected_run, test = t, name
                    break
    first, last = judged[0], judged[-1]
    labelled0, labelled1 = first & ~np.isnan(human), last & ~np.isnan(human)
    return ItemDrift(
        evalue_verdicts=processes["verdicts"].value, evalue_humans=processes["humans"].value,
        drifted=detected_run is not None, detected_run=detected_run, test=test,
        yes_baseline=_share(verdicts[0][first]), yes_latest=_share(verdicts[-1][last]),
        human_agreement_baseline=_share((verdicts[0] == human)[labelled0]),
        human_agreement_latest=_share((verdicts[-1] == human)[labelled1]),
        anchors_latest=int(last.sum()),
    )
