"""How a campaign is stopped from outside: SIGTERM and SIGINT, as Ctrl-C."""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any


class StopSignals:
    """SIGTERM and SIGINT stop a campaign as Ctrl-C does, once. While the campaign cleans up
    (`shield`), and for any repeated signal, they are only noted: the clean-up always finishes,
    and the campaign still ends as interrupted (exit 130, nothing left running)."""

    STOPS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.received = False
        self.shield = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
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
