"""Parse what pgbench writes on stderr: ``-P`` progress lines, client aborts and messages.

Progress formats (all versions): ``progress: T s, X tps, lat A ms stddev S`` then, as the options
ask, ``, N failed`` (15+), ``, lag L ms`` (-R), ``, N skipped`` (-R and -L) and
``, N retried, M retries`` (15+, --max-tries != 1). Counts are per interval.

Messages: 13+ prefix its own messages with ``pgbench: `` and a level (``error:``, ``fatal:`` in
13/14, ``warning:``, ``detail:``, ``hint:``; none for informational lines); 9.6-12 print most of
them bare. Server errors embedded in a message span several lines; those lines are kept with the
message. An ``error:`` does not mean the run failed (the pre-run vacuum of missing tables prints
errors on a successful run): use the exit status and :attr:`PgbenchStderr.aborted`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_INT = r"[0-9]{1,20}"
_NUM = r"-?(?:[0-9]+(?:\.[0-9]+)?|nan|NaN|inf|Infinity)"

_PROGRESS = re.compile(
    rf"progress: (?P<time_s>[0-9]+(?:\.[0-9]+)?) s, (?P<tps>{_NUM}) tps, "
    rf"lat (?P<latency_avg_ms>{_NUM}) ms stddev (?P<latency_stddev_ms>{_NUM})"
    rf"(?:, (?P<failed>{_INT}) failed)?"
    rf"(?:, lag (?P<lag_ms>{_NUM}) ms)?"
    rf"(?:, (?P<skipped>{_INT}) skipped)?"
    rf"(?:, (?P<retried>{_INT}) retried, (?P<retries>{_INT}) retries)?",
    re.ASCII,
)
_MESSAGE = re.compile(
    r"pgbench: (?:(?P<level>error|fatal|warning|detail|hint|debug): )?(?P<text>.*)"
)
# 9.6-11 "client N aborted ...", 12+ "client N script M aborted ...", bare or after a prefix.
_CLIENT_ABORT = re.compile(
    r"(?:pgbench: (?:error|fatal): )?client [0-9]+ (?:script [0-9]+ )?aborted\b"
)
# 12 bare, 13/14 after "pgbench: fatal: ", 15+ after "pgbench: error: ".
_RUN_ABORTED = re.compile(r"(?:^|: )Run was aborted\b")
_RANDOM_SEED = re.compile(rf"(?:pgbench: )?setting random seed to (?P<seed>{_INT})")
_VACUUM_START = "starting vacuum..."
_VACUUM_END = "end."
# Elapsed time never reaches this; --progress-timestamp's Unix epoch (ms precision) always does.
_EPOCH_THRESHOLD = 1e9


@dataclass(frozen=True, kw_only=True)
class ProgressLine:
    """One ``-P`` line; the numbers cover the interval since the previous line."""

    # Seconds since the start; with --progress-timestamp the Unix epoch instead (told apart by
    # magnitude: an elapsed time never reaches 1e9 s). Exactly one of the two is set.
    elapsed_s: float | None = None
    epoch_s: float | None = None
    tps: float
    latency_avg_ms: float
    latency_stddev_ms: float
    failed: int | None = None  # 15+
    lag_ms: float | None = None  # -R
    skipped: int | None = None  # -R with -L
    retried: int | None = None  # 15+ with --max-tries != 1
    retries: int | None = None


@dataclass(frozen=True)
class StderrMessage:
    """A ``pgbench: [level: ]text`` message; ``text`` includes its continuation lines."""

    level: str  # error, fatal, warning, detail, hint, debug, or info (no level word)
    text: str


@dataclass(frozen=True, kw_only=True)
class PgbenchStderr:
    progress: tuple[ProgressLine, ...] = ()
    aborted: bool = False  # "Run was aborted" (12+): the report above it is incomplete
    client_aborts: tuple[str, ...] = ()  # first line of each client abort, as printed
    messages: tuple[StderrMessage, ...] = ()
    random_seed: int | None = None  # 11+, when --random-seed or PGBENCH_RANDOM_SEED is set
    other_lines: tuple[str, ...] = ()  # anything else (9.6-12 bare messages, notices, ...)

    @property
    def errors(self) -> tuple[str, ...]:
        return tuple(m.text for m in self.messages if m.level in ("error", "fatal"))

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(m.text for m in self.messages if m.level == "warning")


def parse_progress_line(line: str) -> ProgressLine | None:
    """Parse one ``-P`` line; None for any other line."""
    match = _PROGRESS.fullmatch(line.rstrip("\r\n"))
    if not match:
        return None
    g = match.groupdict()
    time_s = float(g["time_s"])
    epoch = time_s >= _EPOCH_THRESHOLD
    return ProgressLine(
        elapsed_s=None if epoch else time_s,
        epoch_s=time_s if epoch else None,
        tps=float(g["tps"]),
        latency_avg_ms=float(g["latency_avg_ms"]),
        latency_stddev_ms=float(g["latency_stddev_ms"]),
        failed=None if g["failed"] is None else int(g["failed"]),
        lag_ms=None if g["lag_ms"] is None else float(g["lag_ms"]),
        skipped=None if g["skipped"] is None else int(g["skipped"]),
        retried=None if g["retried"] is None else int(g["retried"]),
        retries=None if g["retries"] is None else int(g["retries"]),
    )


def parse_progress(stderr: str) -> tuple[ProgressLine, ...]:
    """All progress lines of a stderr text, in order."""
    found = (parse_progress_line(line) for line in stderr.split("\n"))
    return tuple(p for p in found if p is not None)


@dataclass
class _ProgressBuilder:
    progress: list[ProgressLine] = field(default_factory=list)
    aborted: bool = False
    client_aborts: list[str] = field(default_factory=list)
    messages: list[tuple[str, list[str]]] = field(default_factory=list)
    random_seed: int | None = None
    other: list[str] = field(default_factory=list)
    open_message: list[str] | None = None  # continuation lines go here

    def feed(self, line: str) -> None:
        # The vacuum banner shares its line with the first vacuum error ("...pgbench: error:").
        rest = line.removeprefix(_VACUUM_START)
        if rest != line or rest == _VACUUM_END:
            self.open_message = None
            if rest in ("", _VACUUM_END):
                return
        if not rest.strip():
            return
        if progress := parse_progress_line(rest):
            self.progress.append(progress)
            self.open_message = None
            return
        self._classify(line, rest)

    def _classify(self, line: str, rest: str) -> None:
        known = False
        if _RUN_ABORTED.search(rest):
            self.aborted = known = True
        if _CLIENT_ABORT.match(rest):
            self.client_aborts.append(rest)
            known = True
        if seed := _RANDOM_SEED.fullmatch(rest):
            self.random_seed = int(seed["seed"])
            known = True
        if message := _MESSAGE.fullmatch(rest):
            self.open_message = [message["text"]]
            self.messages.append((message["level"] or "info", self.open_message))
        elif known:
            self.open_message = None
        elif self.open_message is not None:
            self.open_message.append(line)
        else:
            self.other.append(line)

    def freeze(self) -> PgbenchStderr:
        return PgbenchStderr(
            progress=tuple(self.progress),
            aborted=self.aborted,
            client_aborts=tuple(self.client_aborts),
            messages=tuple(StderrMessage(level, "\n".join(text)) for level, text in self.messages),
            random_seed=self.random_seed,
            other_lines=tuple(self.other),
        )


def parse_stderr(stderr: str) -> PgbenchStderr:
    """Parse a whole stderr text of a benchmark run (any version 9.6-18). Never raises."""
    builder = _ProgressBuilder()
    for line in stderr.split("\n"):
        builder.feed(line.removesuffix("\r"))
    return builder.freeze()


SERVER_CAUSE = re.compile(r"\b(?:ERROR|FATAL|PANIC):")  # a server's own words
_CONTEXT = re.compile(r"\s*(?:\^|LINE \d+:|DETAIL:|HINT:|CONTEXT:)")


def error_summary(text: str, n: int = 3) -> str:
    """pgbench's error output in one line: the first server error (the real cause: a later
    one is often its consequence, such as a prepared statement that never got prepared), then
    the last lines. Progress lines and the server's context lines (carets, LINE 1:) left out."""
    lines = [
        line.strip()
        for line in text.strip().splitlines()
        if line.strip() and not line.startswith("progress:") and not _CONTEXT.match(line)
    ]
    causes = [line for line in lines if SERVER_CAUSE.search(line)]
    return " | ".join(dict.fromkeys([*causes[:1], *lines[-n:]]))
