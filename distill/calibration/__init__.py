"""Calibration: turn raw LLM-judge answers into calibrated per-judge satisfaction (LLM-Rubric)."""

from __future__ import annotations

from distill.calibration.data import CalibrationDataError, CalibrationSet, load_calibration_set
from distill.calibration.network import LLMRubricCalibrator, satisfied_probability

__all__ = [
    "CalibrationDataError",
    "CalibrationSet",
    "LLMRubricCalibrator",
    "load_calibration_set",
    "satisfied_probability",
]
