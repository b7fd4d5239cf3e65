"""Calibration: turn raw LLM-judge answers into calibrated per-judge satisfaction (LLM-Rubric).

The network (torch) lives in ``distill.calibration.network`` and is imported only where a calibrator is trained or
loaded: a worker without a calibration model never imports torch."""
