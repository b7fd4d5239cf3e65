"""convmon's always-on service: events in, per-rubric satisfaction scores and metrics out."""

__version__ = "0.1.0"
