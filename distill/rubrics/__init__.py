"""Rubric learning (SPUR extraction + summarization, RUBICON selection); the pipeline is ``distill.rubrics.learn``."""
