"""Parsers for what the real pgbench prints (PostgreSQL 9.6 to 18), and :mod:`.command`: the argv
of a run spec and its execution.

* :mod:`.report` — the final report on stdout,
* :mod:`.progress` — ``-P`` progress lines and the error/abort messages on stderr,
* :mod:`.version` — ``pgbench -V`` / ``postgres -V``,
* :mod:`.logs` — per-transaction ``-l`` logs (:mod:`.log_files`, :mod:`.log_lines`,
  :mod:`.log_summary`, :mod:`.log_records`); :mod:`.aggregate_logs` — aggregated ones.

Every parser either returns a frozen dataclass or raises
:class:`pgbenchlab.errors.PgbenchParseError`; no other exception escapes for any input text.
The package imports only `errors`, `analysis` (histograms, percentile ranks) and, for
:mod:`.command`, the plan's records.
"""
