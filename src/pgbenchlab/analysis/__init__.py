"""Analysis: pure functions from measured numbers to estimates, comparisons and verdicts.

Owns percentiles and confidence intervals (`stats`), latency histograms (`histogram`), run-level
comparisons and their verdicts (`comparison`), which cells of two selections are compared
(`cells`), step detection along an ordered axis (`changepoints`) and what limited a run
(`diagnosis`); a service-level objective and one open-loop run's verdict against it (`slo`);
the capacity search as a decision from the probes so far to the next probe or the answer
(`capacity`). It may import `errors`, the records it reads (`results`, `records.telemetry`)
and the thresholds of `findings`; nothing here starts a process, opens a database or draws.
"""
