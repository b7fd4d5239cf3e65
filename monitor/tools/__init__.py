"""Programs around the monitor: demo, soak, replay, simulator and benchmarks."""
