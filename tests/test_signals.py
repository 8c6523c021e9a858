"""SIGTERM and SIGINT stop a campaign once; a repeated signal, or one during the clean-up, is
only noted, so the clean-up always finishes."""

from __future__ import annotations

import os
import signal
import time

import pytest

from pgbenchlab.stopsignals import StopSignals


def test_stop_signals_raise_once_and_never_while_shielded() -> None:
    with StopSignals() as signals:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
        os.kill(os.getpid(), signal.SIGTERM)  # repeated: noted only
    assert signals.received
    with StopSignals() as shielded:
        shielded.shield = True
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
    assert shielded.received
