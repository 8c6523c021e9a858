"""A real Prometheus for the tests (Debian's package, installed by `./lab test`): started with a
configuration of its own scraping the given targets every second, its own storage directory
and a free port on 127.0.0.1, stopped and removed afterwards; queried through its HTTP API."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from pgbenchlab.hosts import LOCAL_HOST

SCRAPE_INTERVAL = "1s"
READY_TIMEOUT_S = 60


def unavailable() -> str | None:
    """Why no Prometheus can be started here (None: it can)."""
    if shutil.which("prometheus") is None:
        return "prometheus is not installed (Debian's package; `./lab test` installs it)"
    return None


class Prometheus:
    def __init__(self, targets: list[str], work: Path) -> None:
        work.mkdir(parents=True)
        self.work = work
        self.address = f"127.0.0.1:{LOCAL_HOST.free_port()}"
        config = {  # JSON is YAML
            "global": {"scrape_interval": SCRAPE_INTERVAL, "scrape_timeout": SCRAPE_INTERVAL},
            "scrape_configs": [
                {"job_name": "pgbenchlab", "static_configs": [{"targets": targets}]}
            ],
        }
        (work / "prometheus.yml").write_text(json.dumps(config))
        self.log = (work / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={work / 'prometheus.yml'}",
                f"--storage.tsdb.path={work / 'data'}",
                f"--web.listen-address={self.address}",
                "--log.level=warn",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def __enter__(self) -> Prometheus:
        try:
            self.wait_ready()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log_text()}")
            try:
                with urllib.request.urlopen(f"http://{self.address}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"prometheus not ready in {READY_TIMEOUT_S} s: {self.log_text()}")

    def api(self, path: str, **params: Any) -> Any:
        """The `data` of an API answer; an error answer raises with Prometheus's reason."""
        url = f"http://{self.address}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                body = json.load(answer)
        except urllib.error.HTTPError as exc:
            body = json.load(exc)
        if body["status"] != "success":
            raise AssertionError(f"{params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def raw(self, selector: str, at: float, window_s: int = 600) -> list[dict[str, Any]]:
        """Every sample scraped of the series the selector names in the window before `at`:
        each series with its `metric` labels and `values` as (time, text) pairs."""
        found: list[dict[str, Any]] = self.api("query", query=f"{selector}[{window_s}s]", time=at)[
            "result"
        ]
        return found

    def log_text(self) -> str:
        self.log.flush()
        return (self.work / "prometheus.log").read_text(errors="replace")[-2000:]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        shutil.rmtree(self.work, ignore_errors=True)
