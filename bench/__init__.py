"""Benchmarks behind docs/benchmarks.md: accuracy (SPUR Table 1 on USS), throughput against the raw
consumer, and distillation fidelity. ``convmon bench report --run`` reruns all of them."""
