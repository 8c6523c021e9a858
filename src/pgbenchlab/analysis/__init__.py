"""Analysis: pure functions from measured numbers to estimates, comparisons and verdicts.

Owns percentiles and confidence intervals (`stats`), latency histograms (`histogram`), run-level
comparisons and their verdicts (`comparison`), which cells of two selections are compared
(`cells`), step detection along an ordered axis (`changepoints`) and what limited a run
(`diagnosis`). `slo` reads a service-level objective and judges one open-loop run against it; `capacity` is
the capacity search as a pure decision (probes so far → next probe or answer). It may import
`errors`, the records it reads (`results`, `telemetry.records`)
and the thresholds of `findings`; nothing here starts a process, opens a database or draws.
"""
