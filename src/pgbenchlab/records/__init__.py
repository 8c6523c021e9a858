"""Plain records the lower layers share: what a run's telemetry holds (`telemetry`) and a
PostgreSQL version as its programs print it (`version`). Layer 0: they import nothing above
`errors`, so parsers, installations, analysis and the store can all speak of them."""
