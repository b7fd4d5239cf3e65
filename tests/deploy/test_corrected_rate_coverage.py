"""The corrected rate's 95 % interval covers the truth at its stated rate, as Prometheus computes it.

Simulated traffic with a known DSAT rate: 200 independent 30-minute windows of 2,000 conversations each (in two
input partitions, which the rules sum), every one scored by a distilled model (probabilities that discriminate,
as the simulator's model does) and sent to the judge by the worker's own inclusion policy (a 5 % hash slice
raised by uncertainty, so pi varies). The judged conversations' verdicts are counted by the worker's exporter
with their distilled probabilities (the residual terms), each window's sums are written as promtool input
series (one ``rubric`` label per window), and the shipped recording rules compute the rate and its standard
error. The test checks them against the estimator computed from the units (``bench detect``'s
``ppi_estimate``, not the sums the rules expand), and that 95 % intervals cover the truth in 92-98 % of windows.
promtool is required (tests/deploy/test_promtool.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry

from bench.detect_estimators import Z95, ppi_estimate
from monitor.contracts.metrics import RESIDUAL_TERMS, Metrics
from monitor.contracts.rubric_set import load_rubric_set
from monitor.contracts.scores import ItemResult, ScoreRecord
from monitor.contracts.settings import REPO_ROOT
from monitor.stages.export import Exporter
from monitor.stages.sampler import InclusionPolicy
from tests.support.promtool import promtool

RUBRIC = load_rubric_set("spur-copilot", REPO_ROOT / "prompts")
ITEM = next(i for i in RUBRIC.items if i.polarity == "dsat")
WINDOWS, N, MINUTES = 200, 2_000, 30
BAD, Y_BAD, Y_GOOD = 0.1, 0.6, 0.04  # a tenth of conversations go badly; the judge says yes on 60 % of those
TRUTH = BAD * Y_BAD + (1 - BAD) * Y_GOOD  # 0.096: the DSAT rate of the process


def _window(rng: np.random.Generator, window: int,
            policy: InclusionPolicy) -> tuple[list[dict[str, float]], float, float]:
    """One window's counted sums per input partition (two; through the exporter) and the estimator from its units:
    (sums, rate, se)."""
    bad = rng.random(N) < BAD
    y_all = rng.random(N) < np.where(bad, Y_BAD, Y_GOOD)
    f_all = np.where(bad, rng.beta(6, 4, N), rng.beta(1, 20, N))  # the distilled probability
    exporter = Exporter(Metrics(CollectorRegistry()), dimensions=[], cap=5, rubric=RUBRIC)
    # the distilled side (existing counters): every conversation's probability and its count, per partition
    sums = [{"F": float(f_all[p::2].sum()), "N": float(len(f_all[p::2]))} for p in (0, 1)]
    f_judged, y_judged, pi_judged = [], [], []
    for i in range(N):
        cid = f"w{window}-c{i}"
        f = float(f_all[i])
        decision = policy.decide(cid, probabilities=[f], model_version="v1")
        if not decision.judge:
            continue
        verdict = ItemResult(item_id=ITEM.id, polarity=ITEM.polarity, verdict=bool(y_all[i]))
        score = ScoreRecord(conversation_id=cid, scorer="llm", judge="stub", rubric_set=RUBRIC.id,
                            rubric_version=RUBRIC.version, model_version="judge", items=[verdict], R=0.0,
                            sample_weight=decision.weight, inclusion_probability=decision.pi)
        for (family, _), amount in exporter.observe_batch([score], {cid: {ITEM.id: f}}).items():
            if family in RESIDUAL_TERMS:
                sums[i % 2][family] = sums[i % 2].get(family, 0.0) + amount
        f_judged.append(f)
        y_judged.append(float(y_all[i]))
        pi_judged.append(decision.pi)
    unit = ppi_estimate(f_all, np.array(f_judged), np.array(y_judged), np.array(pi_judged))
    return sums, unit.rate, unit.se


def _counter(name: str, labels: str, total: float) -> str:
    """A counter growing evenly to ``total`` over the window: its 30-minute increase is ``total``."""
    return f"      - series: '{name}{{{labels}}}'\n        values: '0+{total / MINUTES!r}x{MINUTES}'"


def test_the_corrected_rates_interval_covers_the_truth_at_its_stated_rate(tmp_path: Path) -> None:
    rng = np.random.default_rng(36)
    policy = InclusionPolicy(base_rate=0.05, active_rate=0.1)
    policy.set_model("v1", 0.2)
    series = []
    covered = 0
    for k in range(WINDOWS):
        sums, rate, se = _window(rng, k, policy)
        covered += abs(rate - TRUTH) <= Z95 * se
        for partition, counted in enumerate(sums):  # the rules sum the partitions
            labels = f'partition="{partition}",rubric="window-{k}",polarity="dsat"'
            distilled = labels + ',scorer="distilled"'
            series.append(_counter("convmon_partition_rubric_probability_sum_total", distilled, counted["F"]))
            # the distilled verdicts' count is the conversations it scored the item on (every one here)
            series.append(_counter("convmon_partition_rubric_verdicts_total", distilled + ',verdict="no"',
                                   counted["N"]))
            series += [_counter(name + "_total", labels, counted.get(family, 0.0))
                       for family, (name, _) in RESIDUAL_TERMS.items()]
        series += [f"      - series: 'expected_rate{{rubric=\"window-{k}\",polarity=\"dsat\"}}'\n"
                   f"        values: '{rate!r}x{MINUTES}'",
                   f"      - series: 'expected_stderr{{rubric=\"window-{k}\",polarity=\"dsat\"}}'\n"
                   f"        values: '{se!r}x{MINUTES}'"]
    assert 0.92 <= covered / WINDOWS <= 0.98, f"95 % intervals covered the truth in {covered} of {WINDOWS} windows"

    def check(expr: str, value: float) -> str:
        return f"      - expr: '{expr}'\n        eval_time: {MINUTES}m\n        exp_samples:\n" \
               f"          - labels: '{{}}'\n            value: {value}"

    corrected = "rubric:convmon_rubric_corrected:ratio_rate30m"
    stderr = "rubric:convmon_rubric_corrected:stderr_rate30m"
    checks = [
        check(f"count({corrected})", WINDOWS),
        # the rules equal the estimator computed from the units, window by window
        check(f"count(abs({corrected} - expected_rate) > 1e-9) or vector(0)", 0),
        check(f"count(abs({stderr} - expected_stderr) > 1e-9) or vector(0)", 0),
        check(f"count(abs({corrected} - {TRUTH}) <= {Z95} * {stderr})", covered),
    ]
    rules = REPO_ROOT / "deploy" / "prometheus" / "rules"
    test = tmp_path / "coverage_test.yml"
    test.write_text(f"rule_files:\n  - {rules / 'convmon-recording.yml'}\nevaluation_interval: 1m\ntests:\n"
                    f"  - interval: 1m\n    input_series:\n" + "\n".join(series)
                    + "\n    promql_expr_test:\n" + "\n".join(checks) + "\n")
    result = promtool("test", "rules", test)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
