"""Parsers for what the real pgbench prints (PostgreSQL 9.6 to 18); its argv and execution are
:mod:`pgbenchlab.invocation`.

* :mod:`.report` — the final report on stdout,
* :mod:`.progress` — ``-P`` progress lines and the error/abort messages on stderr,
* :mod:`.logs` — per-transaction ``-l`` logs (:mod:`.log_files`, :mod:`.log_lines`,
  :mod:`.log_summary`, :mod:`.log_records`); :mod:`.aggregate_logs` — aggregated ones.

Every parser either returns a frozen dataclass or raises
:class:`pgbenchlab.errors.PgbenchParseError`; no other exception escapes for any input text.
The package imports only `errors`, `records` and `analysis` (histograms, percentile ranks).
"""
