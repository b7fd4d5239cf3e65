"""LLM judges: the OpenAI-compatible client, prompts, parsing, budget and the judge modes.

``monitor.judge.build.build_judge`` picks the configured one.
"""
