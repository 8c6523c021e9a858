"""Plain records the lower layers share: what a run's telemetry holds (`telemetry`), a
PostgreSQL version as its programs print it (`version`) and a run's matrix cell (`cell`).
Layer 0: they import nothing above `errors`, so parsers, installations, analysis and the store
can all speak of them."""
