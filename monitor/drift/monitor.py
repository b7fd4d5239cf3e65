"""Per-worker drift monitoring: the exporter feeds score records, this sets the drift gauges.

Per rubric item it runs PSI and JSD on the distilled probabilities (sliding window vs reference),
Page-Hinkley and CUSUM on the item's rate for each scorer, and judge/distilled agreement on the
shadow slice; across items, a domain classifier on the vector of distilled probabilities.

The change-point detectors see one value per ``batch_size`` conversations: the batch's mean rate
as a z-score against the reference rate ``p0`` with the binomial standard error
``sqrt(p0 (1 - p0) / batch_size)`` (``p0`` clipped to [0.02, 0.98] so rare items are not
hair-triggered). Distilled probabilities vary less than 0/1 verdicts, so the error is an upper
bound and the test conservative. Batching makes one setting fit every item and every volume.

Reference: :meth:`DriftMonitor.set_reference` with each item's distilled probabilities on the
training data: the worker calls it whenever a model version goes live, with the reference stored
with that version in the registry (out-of-fold predictions on the hash slice of its training data,
distill/train.py), so a restart reloads the same reference. Without one (no live model yet, or a
model from before references were stored), each detector takes the first ``reference_size`` observations this
worker sees as the reference (``convmon_drift_reference_size`` is 0 until that window is full),
so drift is then measured against the start of the worker's life, not against training.

Workers see disjoint random slices of the traffic (partitions are keyed by conversation id), so
each worker's gauges are estimates of the same quantities; dashboards take ``max``/``avg``.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from monitor.contracts.metrics import Metrics
from monitor.contracts.rubric_set import RubricItem, RubricSet
from monitor.contracts.scores import ScoreRecord, verdict_label
from monitor.contracts.sections import DriftSettings
from monitor.drift.agreement import Agreement
from monitor.drift.feature_drift import FeatureDrift
from monitor.drift.jsd import JSD
from monitor.drift.page_hinkley import Mode
from monitor.drift.psi import PSI
from monitor.drift.rate_stream import RateStream

CHANGE_DETECTORS = ("page_hinkley", "cusum")
SCORERS = ("llm", "distilled")
AGREEMENT_PUBLISH_EVERY = 10  # shadow pairs between two AUC computations (a sort of the window)


class _ItemDrift:
    def __init__(self, item: RubricItem, m: DriftMonitor) -> None:
        direction: Mode = "down" if item.polarity == "sat" else "up"  # a drop in SAT, a rise in DSAT
        self.psi = PSI(window_size=m.window_size, reference_size=m.reference_size)
        self.jsd = JSD(window_size=m.window_size, reference_size=m.reference_size)
        self.rates = {
            s: RateStream(direction=direction, batch_size=m.batch_size, reference_size=m.reference_size)
            for s in SCORERS
        }
        self.agreement = Agreement(window_size=m.agreement_window)
        self.seen = 0
        self.pairs = 0


class DriftMonitor:
    """Feeds every detector from score records and publishes their state as gauges."""

    def __init__(
        self,
        metrics: Metrics,
        rubric: RubricSet,
        *,
        window_size: int = 500,
        reference_size: int = 1000,
        batch_size: int = 50,
        agreement_window: int = 500,
        hold_s: float = 900.0,
        pair_capacity: int = 10_000,
        feature_interval_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.metrics = metrics
        self.rubric = rubric
        self.window_size = window_size
        self.reference_size = reference_size
        self.batch_size = batch_size
        self.agreement_window = agreement_window
        self.hold_s = hold_s
        self.pair_capacity = pair_capacity
        self.feature_interval_s = feature_interval_s
        self._clock = clock
        self._items = {item.id: _ItemDrift(item, self) for item in rubric.items}
        self._features: dict[str, FeatureDrift] = {}
        self._pending: OrderedDict[str, ScoreRecord] = OrderedDict()
        self._last_fired: dict[tuple[str, str, str], float] = {}
        self._lock = threading.Lock()
        self._init_series()

    @classmethod
    def from_settings(cls, metrics: Metrics, rubric: RubricSet, settings: DriftSettings) -> DriftMonitor:
        return cls(
            metrics, rubric, window_size=settings.drift_window, reference_size=settings.drift_reference_size,
            batch_size=settings.drift_batch_size, agreement_window=settings.agreement_window,
            hold_s=settings.drift_hold_s, feature_interval_s=settings.drift_feature_interval_s,
        )

    def _init_series(self) -> None:
        m = self.metrics
        nan = float("nan")
        m.feature_drift_auc.labels("probabilities").set(nan)
        m.feature_drift_mean_shift.labels("probabilities").set(nan)
        for item_id in self._items:
            m.drift_psi.labels(item_id).set(nan)
            m.drift_jsd.labels(item_id).set(nan)
            m.drift_reference_size.labels(item_id).set(0)
            m.agreement_accuracy.labels(item_id).set(nan)
            m.agreement_auc.labels(item_id).set(nan)
            m.agreement_window.labels(item_id).set(0)
            for judge in ("yes", "no"):
                for distilled in ("yes", "no"):
                    m.agreement_pairs.labels(item_id, judge, distilled)
            for detector, scorer in self._detector_labels():
                m.drift_detected.labels(item_id, detector, scorer).set(0)
                m.drift_detections.labels(item_id, detector, scorer)
                if detector in CHANGE_DETECTORS:
                    m.drift_statistic.labels(item_id, detector, scorer).set(0)

    @staticmethod
    def _detector_labels() -> Iterable[tuple[str, str]]:
        yield from (("psi", "distilled"), ("jsd", "distilled"), ("agreement", "shadow"))
        yield from ((d, s) for d in CHANGE_DETECTORS for s in SCORERS)

    def set_reference(self, reference: Mapping[str, Iterable[float]]) -> None:
        """Item id -> distilled probabilities on the training data: the drift baseline.

        Called from the classify thread when a model goes live; ``observe`` runs on the event loop,
        so both hold the monitor's lock.
        """
        with self._lock:
            self._set_reference(reference)

    def _set_reference(self, reference: Mapping[str, Iterable[float]]) -> None:
        for item_id, values in reference.items():
            state = self._items.get(item_id)
            if state is None:
                raise KeyError(f"reference names item {item_id!r}, which is not in rubric set {self.rubric.key}")
            arr = np.asarray(list(values), dtype=float)
            state.psi.set_reference(arr)
            state.jsd.set_reference(arr)
            for stream in state.rates.values():
                stream.set_p0(float(arr.mean()))
            self.metrics.drift_reference_size.labels(item_id).set(len(arr))

    def observe(self, score: ScoreRecord) -> None:
        """Feed one score record (called by the exporter)."""
        with self._lock:
            self._observe(score)

    def _observe(self, score: ScoreRecord) -> None:
        if score.scorer == "distilled":
            self._observe_distilled(score)
            if score.shadow:
                self._pair(score)
        else:
            self._observe_llm(score)
            self._pair(score)

    def observe_features(self, x: Iterable[float], *, source: str = "embedding") -> None:
        """Feed a feature vector (e.g. the featurizer's output) to the feature-drift detector of ``source``."""
        detector = self._features.get(source)
        if detector is None:
            detector = self._features[source] = FeatureDrift(
                window_size=self.window_size, reference_size=self.reference_size, every=self.window_size,
                min_interval_s=self.feature_interval_s, clock=self._clock,
            )
        before = detector.evaluations
        detector.update(np.fromiter(x, dtype=float))
        if detector.evaluations != before:
            self.metrics.feature_drift_auc.labels(source).set(detector.auc)
            self.metrics.feature_drift_mean_shift.labels(source).set(detector.mean_shift)

    def _observe_distilled(self, score: ScoreRecord) -> None:
        vector = []
        for result in score.items:
            state = self._items.get(result.item_id)
            if state is None or result.probability is None:
                continue
            p = result.probability
            vector.append(p)
            state.psi.update(p)
            state.jsd.update(p)
            state.seen += 1
            if state.seen % self.batch_size == 0:
                self._publish_histograms(result.item_id, state)
            self._rate(result.item_id, "distilled", state.rates["distilled"].update(p))
        if len(vector) == len(self._items):
            self.observe_features(vector, source="probabilities")

    def _observe_llm(self, score: ScoreRecord) -> None:
        for result in score.items:
            state = self._items.get(result.item_id)
            verdict = verdict_label("llm", result)
            if state is None or verdict == "uncertain":
                continue
            self._rate(result.item_id, "llm", state.rates["llm"].update(1.0 if verdict == "yes" else 0.0))

    def _publish_histograms(self, item_id: str, state: _ItemDrift) -> None:
        m = self.metrics
        m.drift_reference_size.labels(item_id).set(state.psi.reference_n)
        m.drift_psi.labels(item_id).set(state.psi.value)
        m.drift_jsd.labels(item_id).set(state.jsd.value)
        for name, detector in (("psi", state.psi), ("jsd", state.jsd)):
            self._flag(item_id, name, "distilled", detector.drift_detected)

    def _rate(self, item_id: str, scorer: str, fired: list[str] | None) -> None:
        if fired is None:
            return
        stream = self._items[item_id].rates[scorer]
        for name, detector in stream.detectors.items():
            self.metrics.drift_statistic.labels(item_id, name, scorer).set(detector.statistic)
            self._flag(item_id, name, scorer, name in fired)

    def _flag(self, item_id: str, detector: str, scorer: str, fired: bool) -> None:
        """Count a detection, and hold the gauge at 1 for ``hold_s`` after the last one."""
        key = (item_id, detector, scorer)
        now = self._clock()
        was_on = now - self._last_fired.get(key, -float("inf")) < self.hold_s
        if fired:
            # state detectors (psi, jsd, agreement) stay True while drifted: count rising edges only
            stateful = detector in ("psi", "jsd", "agreement")
            if not (stateful and was_on):
                self.metrics.drift_detections.labels(*key).inc()
            self._last_fired[key] = now
        on = now - self._last_fired.get(key, -float("inf")) < self.hold_s
        self.metrics.drift_detected.labels(*key).set(1 if on else 0)

    def _pair(self, score: ScoreRecord) -> None:
        other = self._pending.pop(score.conversation_id, None)
        if other is None or other.scorer == score.scorer:
            self._pending[score.conversation_id] = score
            while len(self._pending) > self.pair_capacity:
                self._pending.popitem(last=False)
            return
        llm, distilled = (score, other) if score.scorer == "llm" else (other, score)
        probabilities = {r.item_id: r.probability for r in distilled.items}
        m = self.metrics
        for result in llm.items:
            verdict = verdict_label("llm", result)
            p = probabilities.get(result.item_id)
            state = self._items.get(result.item_id)
            if state is None or p is None or verdict == "uncertain":
                continue
            state.agreement.update((verdict == "yes", p))
            state.pairs += 1
            m.agreement_pairs.labels(result.item_id, verdict, "yes" if p >= 0.5 else "no").inc()
            if state.pairs % AGREEMENT_PUBLISH_EVERY == 0 or state.agreement.n <= state.agreement.min_samples:
                m.agreement_accuracy.labels(result.item_id).set(state.agreement.accuracy)
                m.agreement_auc.labels(result.item_id).set(state.agreement.auc)
                m.agreement_window.labels(result.item_id).set(state.agreement.n)
                self._flag(result.item_id, "agreement", "shadow", state.agreement.drift_detected)
