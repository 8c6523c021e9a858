"""Open an HTML report in headless Chromium and say what happened, over the DevTools protocol.

Chromium runs with the network made unusable (every host resolves to nothing, a dead proxy),
so a report that needed a CDN would fail here. The page reports console messages, uncaught
exceptions and failed loads; the page script marks ``body[data-charts-done]`` when every
chart has been drawn, and the time from navigation to that point is measured in the page.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import websocket

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--hide-scrollbars",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-server=127.0.0.1:9",
    "--remote-debugging-port=0",
)
LISTENING = re.compile(r"DevTools listening on (ws://\S+)")


def chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class PageResult:
    console: list[str] = field(default_factory=list)  # console messages, exceptions, load errors
    render_ms: float | None = None  # navigation start to every chart drawn, in the page's clock
    charts: dict[str, int] = field(default_factory=dict)  # chart id -> marks drawn
    checks: dict[str, Any] = field(default_factory=dict)  # answers to the probe expressions
    screenshot: bytes | None = None


class Browser:
    """One headless Chromium with one page, driven over a DevTools websocket."""

    def __init__(self, width: int = 1400, height: int = 3000) -> None:
        binary = chromium()
        if binary is None:
            raise RuntimeError("chromium not installed")
        self.profile = tempfile.mkdtemp(prefix="pgbenchlab-chromium-")
        self.process = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self.profile}", f"--window-size={width},{height}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.ws = websocket.create_connection(self._browser_url(), timeout=60)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)

    def _browser_url(self) -> str:
        assert self.process.stderr is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            match = LISTENING.search(line)
            if match:
                return match.group(1)
        raise RuntimeError("chromium did not open its DevTools port")

    def call(self, method: str, *, session: bool = False, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        self.ws.send(json.dumps(message))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))
            self.events.append(reply)
            if reply.get("method") == "Page.javascriptDialogOpening":
                # An alert() would block the page: record it, dismiss it, carry on.
                self.ws.send(
                    json.dumps(
                        {
                            "id": -len(self.events),
                            "method": "Page.handleJavaScriptDialog",
                            "params": {"accept": True},
                            "sessionId": self.session,
                        }
                    )
                )

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (a promise is awaited)."""
        result = self.call(
            "Runtime.evaluate",
            session=True,
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
        )
        return result.get("result", {}).get("value")

    def marks(self) -> dict[str, int]:
        """Per chart: how many marks (points, lines, bars, cells) it drew; 0 = nothing."""
        counted: dict[str, int] = self.evaluate(
            "Object.fromEntries([...document.querySelectorAll('figure.chart, #run-detail .chart')]"
            ".map(f => [f.id, f.dataset.rendered === '1' ? "
            "f.querySelectorAll('svg g.role-mark > *').length : 0]))"
        )
        return counted

    def open(self, url: str, timeout_s: float = 60) -> PageResult:
        self.events.clear()
        self.call("Page.navigate", session=True, url=url)
        deadline = time.monotonic() + timeout_s
        done = False
        ready = (
            "document.readyState === 'complete' && !!document.body"
            " && document.body.dataset.chartsDone === '1'"
        )
        while time.monotonic() < deadline and not done:
            done = bool(self.evaluate(ready))
            if not done:
                time.sleep(0.05)
        time.sleep(0.3)  # let late console messages arrive
        self.evaluate("1")
        result = PageResult(console=self._problems())
        if done:  # drawn and loaded: whichever came last
            result.render_ms = self.evaluate(
                "Math.max(Number(document.body.dataset.renderMs),"
                " performance.getEntriesByType('navigation')[0].loadEventEnd)"
            )
        result.charts = self.marks()
        return result

    def problems(self) -> list[str]:
        """Console messages, exceptions, dialogs and failed loads since the last `open`."""
        self.evaluate("1")  # collect the events that arrived meanwhile
        return self._problems()

    def _problems(self) -> list[str]:
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled":
                text = " ".join(
                    str(a.get("value", a.get("description", ""))) for a in params["args"]
                )
                found.append(f"console.{params['type']}: {text}")
            elif method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                found.append(
                    f"exception: {details.get('exception', {}).get('description', details)}"
                )
            elif method == "Page.javascriptDialogOpening":
                found.append(f"dialog {params.get('type')}: {params.get('message')}")
            elif method == "Log.entryAdded":
                entry = params["entry"]
                found.append(
                    f"{entry['source']} {entry['level']}: {entry['text']} {entry.get('url', '')}"
                )
        return found

    def screenshot(self) -> bytes:
        data = self.call("Page.captureScreenshot", session=True, format="png")["data"]
        return base64.b64decode(data)

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_report(
    path: Path,
    fragment: str = "",
    *,
    probes: dict[str, str] | None = None,
    screenshot: bool = False,
) -> PageResult:
    """Load a report (at ``fragment``, e.g. "#run-3"); evaluate ``probes`` in the page."""
    with Browser() as browser:
        result = browser.open(path.resolve().as_uri() + fragment)
        result.checks = {name: browser.evaluate(js) for name, js in (probes or {}).items()}
        if screenshot:
            result.screenshot = browser.screenshot()
        return result


def screenshot_of(path: Path, selector: str, height: int) -> bytes:
    """A picture of the report from the element ``selector`` down, ``height`` pixels tall."""
    with Browser(1400, 1000) as browser:
        browser.open(path.resolve().as_uri())
        top = browser.evaluate(
            f"document.querySelector({json.dumps(selector)}).getBoundingClientRect().top"
            " + window.scrollY"
        )
        clip = {"x": 0, "y": top, "width": 1400, "height": height, "scale": 1}
        data = browser.call(
            "Page.captureScreenshot",
            session=True,
            format="png",
            captureBeyondViewport=True,
            clip=clip,
        )["data"]
        return base64.b64decode(data)
