"""The run table and each run's detail as compact JSON for the HTML page.

The run table is a column list plus rows of values (no repeated keys); per-run series are
columnar. That keeps a thousand-run report within its size budget.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pgbenchlab.report.render.chart_data import THREADS_LABEL, event_rows, seconds_rows
from pgbenchlab.report.views import telemetry_series
from pgbenchlab.report.views.columns import column_doc
from pgbenchlab.report.views.model import HistogramView, ReportView, RunView, TelemetrySeries
from pgbenchlab.report.views.telemetry_series import LIMITS, PROCESS_CPU

K = TypeVar("K", bound=Hashable)
LEVELS = 100  # telemetry values are kept to 1 % of their series' peak


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    fmt: str  # int | tps | ms | pct | num | text
    get: Callable[[RunView], Any]
    help: str = ""
    hidden: bool = False


def _attr(name: str) -> Callable[[RunView], Any]:
    return lambda r: getattr(r, name)


def _col(key: str, title: str, fmt: str, help_text: str = "", hidden: bool = False) -> Column:
    return Column(key, title, fmt, _attr(key), help_text, hidden)


def _run(key: str, title: str, fmt: str, help_text: str | None = None) -> Column:
    """A column of a stored run field: its help is the results registry's doc of it."""
    return _col(key, title, fmt, column_doc(key) if help_text is None else help_text)


COLUMNS: tuple[Column, ...] = (
    _col("id", "run", "text", "the run's id in the results database (pgbenchlab show ID)"),
    Column("order", "order", "int", lambda r: r.sequence + 1, "position in the run order"),
    _run("server", "server", "text", "the server and its variant (settings, kernel tunables)"),
    _run("scale", "scale", "int"),
    _run("workload", "workload", "text"),
    _run("clients", "clients", "int"),
    _run("threads", "threads", "int"),
    _run("protocol", "protocol", "text"),
    _run("rate", "rate", "num"),
    _run("latency_limit_ms", "limit ms", "num"),
    Column("connect", "-C", "text", lambda r: "yes" if r.connect else "", "new connection per tx"),
    _run("connection", "via", "text"),
    _run("duration_s", "duration s", "int"),
    _run("repeat", "repeat", "int"),
    _run("status", "status", "text"),
    _run("tps", "TPS", "tps"),
    _run("transactions", "transactions", "int"),
    _run("failed", "failed tx", "int"),
    _col(
        "retried",
        "retried tx",
        "int",
        "transactions retried after a serialization or deadlock failure (max_tries)",
    ),
    _run("latency_avg_ms", "lat avg ms", "ms"),
    _run("latency_stddev_ms", "lat sd ms", "ms"),
    _run("p50_ms", "p50 ms", "ms"),
    _run("p90_ms", "p90 ms", "ms"),
    _run("p95_ms", "p95 ms", "ms"),
    _run("p99_ms", "p99 ms", "ms"),
    _run("p999_ms", "p99.9 ms", "ms"),
    _run("min_ms", "min ms", "ms"),
    _run("max_ms", "max ms", "ms"),
    _col("late_share", "late", "pct", "transactions above the latency limit"),
    _col("skipped_share", "skipped", "pct", "transactions skipped as already late"),
    _run("lag_avg_ms", "lag ms", "ms"),
    _run("service_p99_ms", "service p99 ms", "ms"),
    _run("connection_time_ms", "connect ms", "ms"),
    _run("tls_protocol", "TLS", "text"),
    _run("tls_cipher", "TLS cipher", "text"),
    _run("client_cpu_us_per_tx", "client µs/tx", "num"),
    _run("server_cpu_us_per_tx", "server µs/tx", "num"),
    _run("server_user_us_per_tx", "server user µs/tx", "num"),
    _run("server_system_us_per_tx", "server sys µs/tx", "num"),
    _run("wal_bytes_per_tx", "WAL B/tx", "num"),
    _run("buffers_hit_per_tx", "hit/tx", "num"),
    _run("buffers_read_per_tx", "read/tx", "num"),
    _run("buffers_dirtied_per_tx", "dirtied/tx", "num"),
    _run("buffers_written_per_tx", "written/tx", "num"),
    _run("context_switches_per_tx", "switches/tx", "num"),
    _run("instructions_per_tx", "instructions/tx", "num"),
    _run("cycles_per_tx", "cycles/tx", "num"),
    _run("warmup_tps", "warmup TPS", "tps"),
    _run("vacuum_s", "vacuum s", "num"),
    _run("checkpoint_s", "checkpoint s", "num"),
    _run("reset", "dataset reset", "text"),
    _run("instructions_per_tx", "instructions/tx", "num"),
    _run("latency_source", "latency from", "text"),
    Column(
        "diagnosis",
        "limited by",
        "text",
        lambda r: (r.diagnosis or "").replace("_", " "),
        "what limited the run, from telemetry (wait events, CPU, I/O, checkpoints)",
    ),
    Column("warnings", "warnings", "int", lambda r: len(r.stored_warnings) or None),
    _col("cell_id", "cell", "text", hidden=True),
)


# Its values depend on the other runs (`_telemetry_marks`), not on the run alone.
TELEMETRY_COLUMN = Column(
    "telemetry",
    "telemetry charts",
    "text",
    lambda r: None,
    "whether this page draws the run's telemetry (see a left-out run's detail for the rule)",
)


def runs_payload(view: ReportView) -> dict[str, Any]:
    """Every run as a row; a column no run has a value for (no -R, no -C) is not shown, nor is
    the telemetry column when every run's telemetry is embedded."""
    marks = _telemetry_marks(view)
    all_columns = (*COLUMNS, TELEMETRY_COLUMN)
    rows = [[c.get(r) for c in COLUMNS] + [marks.get(r.id)] for r in view.runs]
    empty = [all(row[i] in (None, "") for row in rows) for i in range(len(all_columns))]
    columns = [
        {"key": "cell" if c.key == "cell_id" else c.key, "title": c.title, "fmt": c.fmt}
        | ({"help": c.help} if c.help else {})
        | ({"hidden": True} if c.hidden or empty[i] else {})
        for i, c in enumerate(all_columns)
    ]
    return {"columns": columns, "rows": rows}


def _telemetry_marks(view: ReportView) -> dict[int, str]:
    """Per run with telemetry, whether its charts are drawn; nothing when none is left out."""
    if not any(r.telemetry_left_out for r in view.runs):
        return {}
    marks = {r.id: "drawn" for r in view.runs if r.telemetry}
    return marks | {r.id: "left out" for r in view.runs if r.telemetry_left_out}


def _columnar(
    rows: list[dict[str, Any]], names: tuple[str, ...]
) -> list[list[Any] | int | None] | None:
    """Rows as columns; a column with no value is null, and a first column counting up by one
    (the seconds of a run) is its first value: the page counts on from it."""
    if not rows:
        return None
    columns: list[list[Any] | int | None] = [[row[n] for row in rows] for n in names]
    columns[0] = _counted(columns[0]) if isinstance(columns[0], list) else None
    return [None if isinstance(c, list) and all(v is None for v in c) else c for c in columns]


def _counted(values: list[Any]) -> list[Any] | int:
    """Values counting up by one from an integer as that integer; other values as they are."""
    first = values[0] if values else None
    if isinstance(first, int) and values == list(range(first, first + len(values))):
        return first
    return values


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


SHOWN_ELSEWHERE = frozenset({"warmup_s", "vacuum", "threads"})  # facts or table columns


def run_facts(r: RunView) -> list[tuple[str, str]]:
    """Facts of a run beyond the run table's columns, as (label, text)."""
    facts = [
        ("started", _when(r.started_at)),
        ("finished", _when(r.finished_at)),
        ("warmup", f"{r.warmup_s} s"),
        ("vacuum before the run", r.vacuum),
        ("transactions per client (-t)", str(r.transactions_per_client or "")),
        ("latency samples", f"{r.latency_samples:,}" if r.latency_samples else ""),
        ("service time p50 / p99 / p99.9 ms", _service(r)),
        ("pgbench", r.pgbench_version),
        ("run key", r.run_key),
    ]
    facts += [(f"option {k}", v) for k, v in r.options if k not in SHOWN_ELSEWHERE]
    facts += [(f"stored warning {i + 1}", w.text) for i, w in enumerate(r.stored_warnings)]
    facts += [(f"CPUs allowed {i + 1}", text) for i, text in enumerate(r.cpu_affinity)]
    facts += [(f"limited by: evidence {i + 1}", e) for i, e in enumerate(r.diagnosis_evidence)]
    return [(k, v) for k, v in facts if v]


def common_facts(view: ReportView) -> list[tuple[str, str]]:
    """The facts every run shares (same pgbench, warmup, options): shown once, with the setup."""
    per_run = [set(run_facts(r)) for r in view.runs]
    if not per_run:
        return []
    shared = set.intersection(*per_run)
    return [fact for fact in run_facts(view.runs[0]) if fact in shared]


def _service(r: RunView) -> str:
    values = (r.service_p50_ms, r.service_p99_ms, r.service_p999_ms)
    if all(v is None for v in values):
        return ""
    return " / ".join("-" if v is None else f"{v:.3f}" for v in values)


def detail_payload(view: ReportView) -> dict[str, Any]:
    """Per run: command line, facts, output, and columnar series. Histogram bins are listed
    once for the campaign (runs share their latency grid) and runs name them by index."""
    detail: dict[str, Any] = {}
    bins = BinTable()
    series: Interned[tuple[str, str]] = Interned()
    shared = set(common_facts(view))
    for r in view.runs:
        facts = [f for f in run_facts(r) if f not in shared]
        item: dict[str, Any] = {"argv": list(r.argv), "facts": facts}
        if r.pgbench_output:
            item["out"] = r.pgbench_output
        if r.error:
            item["err"] = r.error
        seconds = _columnar(seconds_rows(r), ("t", "tps", "mean", "min", "max", "lag"))
        if seconds:
            item["s"] = seconds
        if r.histogram is not None:
            item["h"] = bins.encode(r.histogram)
        events = event_rows(r)
        if events:
            item["e"] = [[e["t"], e["kind"], e["detail"]] for e in events]
        if r.telemetry:
            item["x"] = encode_telemetry(r.telemetry, series)
        detail[str(r.id)] = item
    found: dict[str, Any] = {"runs": detail, "bins": bins.bins.values}
    if any(r.telemetry or r.telemetry_left_out for r in view.runs):
        found["telemetry"] = {
            "series": series.values,
            "note": telemetry_note(view),
            "limit": {"dataset": LIMITS, "label": THREADS_LABEL, "with": PROCESS_CPU},
        }
    return found


def telemetry_note(view: ReportView) -> str:
    """What the page says about the runs whose telemetry it left out, if any."""
    left_out = sum(1 for r in view.runs if r.telemetry_left_out)
    if not left_out:
        return ""
    drawn = sum(1 for r in view.runs if r.telemetry)
    budget = telemetry_series.TELEMETRY_SECONDS
    return (
        f"To keep this file small, telemetry charts are drawn for {drawn:,} of the "
        f"{drawn + left_out:,} runs with telemetry: the first repeat of every cell first, then "
        f"later repeats in run order, up to {budget:,} s of measured run time. The run table's "
        '"telemetry charts" column says which; every run\'s series are in the results database '
        "(table run_telemetry_seconds)."
    )


def encode_telemetry(
    series: Sequence[TelemetrySeries], names: Interned[tuple[str, str]]
) -> list[Any]:
    """[seconds, [[name index, scale, values…], …]]: seconds as the first one when they count
    up by one, else listed; each value an integer (× scale) to 1 % of its series' peak, null
    where the series has no reading that second."""
    seconds = _seconds_of(series)
    encoded = []
    for s in series:
        if list(s.t) == seconds:
            aligned = list(s.values)
        else:
            by_t = dict(zip(s.t, s.values, strict=True))
            aligned = [by_t.get(t) for t in seconds]
        scale = _scale(max(abs(v) for v in aligned if v is not None))
        ints = [None if v is None else round(v / scale) for v in aligned]
        encoded.append([names.index((s.dataset, s.label)), scale, *ints])
    return [_counted(seconds), encoded]


def _seconds_of(series: Sequence[TelemetrySeries]) -> list[int]:
    return sorted({t for s in series for t in s.t})


def _scale(peak: float) -> float | int:
    """The unit of a series' integers: its peak / LEVELS, to three significant digits."""
    if peak <= 0:
        return 1
    unit = peak / LEVELS
    rounded = round(unit, 2 - math.floor(math.log10(unit)))
    return int(rounded) if rounded.is_integer() else rounded


class Interned(Generic[K]):
    """Distinct values, each stored once in `values`; the page refers to them by index."""

    def __init__(self) -> None:
        self.values: list[K] = []
        self.indexes: dict[K, int] = {}

    def index(self, value: K) -> int:
        if value not in self.indexes:
            self.indexes[value] = len(self.values)
            self.values.append(value)
        return self.indexes[value]


class BinTable:
    """Distinct (lower, upper) latency bins of the campaign, each stored once."""

    def __init__(self) -> None:
        self.bins: Interned[tuple[float, float]] = Interned()

    def encode(self, h: HistogramView) -> list[list[int]]:
        """The run's non-empty bins as [bin indexes, counts]; empty bins change no share."""
        indexes, counts = [], []
        for lo, hi, n in zip(h.lower_ms, h.upper_ms, h.counts, strict=True):
            if n:
                indexes.append(self.bins.index((lo, hi)))
                counts.append(n)
        return [indexes, counts]
