"""A pgbench call: the argv of a run spec and its execution (`command`), and the summed report
of a run split across load generators (`shares`). Above the plan (it reads run options) and
the parsers (it reads what pgbench printed)."""
