"""The checkpoint engine: partition writers, their checkpoint and changelog, the stateless loops."""
