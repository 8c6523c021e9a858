"""How a command is stopped from outside: SIGTERM and SIGINT, as Ctrl-C — a campaign, and a
build wherever it runs (`build`, `run`, `bisect`, `capacity`)."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any


class Stopped(KeyboardInterrupt):
    """An interruption that says what it stopped and what it cleaned up (one line)."""


class StopSignals:
    """SIGTERM and SIGINT stop a campaign (or a build) as Ctrl-C does, once. While it cleans up
    (`shield`), and for any repeated signal, they are only noted: the clean-up always finishes,
    and the command still ends as interrupted (exit 130, nothing left running). Signals reach
    the main thread only: entered in another thread, this does nothing."""

    STOPS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.received = False
        self.shield = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._handle) for sig in self.STOPS}
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, action in self._previous.items():
            signal.signal(sig, action)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        first = not self.received
        self.received = True
        if first and not self.shield:
            raise KeyboardInterrupt


def restore_interrupt() -> None:
    """SIGINT handled again when this process started with it ignored (a background job of a
    non-interactive shell, nohup): every child would inherit the ignored SIGINT, and pgbenchlab
    asks its children (pgbench, a build's make) to stop with SIGINT."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
