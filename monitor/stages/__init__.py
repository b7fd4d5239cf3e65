"""The monitor's work as plain classes and functions, in flow order; no faust import, unit-tested."""
