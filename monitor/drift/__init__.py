"""Drift detectors in River's style (``update(x)``, read-only ``drift_detected``) and the monitor
that runs them per rubric item in each worker."""

from __future__ import annotations

from monitor.drift.agreement import Agreement
from monitor.drift.base import DriftDetector
from monitor.drift.cusum import CUSUM
from monitor.drift.feature_drift import FeatureDrift
from monitor.drift.jsd import JSD
from monitor.drift.monitor import DriftMonitor
from monitor.drift.page_hinkley import PageHinkley
from monitor.drift.psi import PSI

__all__ = ["CUSUM", "JSD", "PSI", "Agreement", "DriftDetector", "DriftMonitor", "FeatureDrift", "PageHinkley"]
