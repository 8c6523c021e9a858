"""Open an HTML report in headless Chromium (Debian's, driven by Playwright) and say what happened.

Chromium runs with the network made unusable (every host resolves to nothing, a dead proxy),
so a report that needed a CDN would fail here. A page records console messages (the browser's
own log entries, such as a failed load, arrive as console messages too), uncaught exceptions,
dialogs, failed requests and crashes; the page script marks ``body[data-charts-done]`` when
every chart has been drawn, and the time from navigation to that point is measured in the page.

Playwright's own browser downloads are never used (`playwright install` is not needed): the
system's ``chromium`` is launched through ``executable_path``.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when a browser starts, so that a missing package can be reported
    from playwright.sync_api import Browser as PlaywrightBrowser
    from playwright.sync_api import (
        BrowserContext,
        ConsoleMessage,
        Dialog,
        Page,
        Playwright,
        Request,
    )

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
# Playwright adds --headless, --no-sandbox (needed as root), --hide-scrollbars and turns off
# background networking, updates, sync and first-run pages; these are the rest.
FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-server=127.0.0.1:9",
)
LOAD_TIMEOUT_S = 60
LATE_MESSAGES_MS = 300  # after the charts are drawn, time for late console messages to arrive
CHARTS_DONE = (
    "document.readyState === 'complete' && !!document.body"
    " && document.body.dataset.chartsDone === '1'"
)
RENDER_MS = (
    "Math.max(Number(document.body.dataset.renderMs),"
    " performance.getEntriesByType('navigation')[0].loadEventEnd)"
)
MARKS = (
    "Object.fromEntries([...document.querySelectorAll('figure.chart, #run-detail .chart')]"
    ".map(f => [f.id, f.dataset.rendered === '1' ? "
    "f.querySelectorAll('svg g.role-mark > *').length : 0]))"
)


def chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def unavailable() -> str | None:
    """Why no browser test can run here (the skip reason), or None when one can."""
    if importlib.util.find_spec("playwright") is None:
        return "playwright not installed (pip install -e '.[dev]'): browser test NOT run"
    if chromium() is None:
        return "chromium not found (apt-get install chromium): browser test NOT run"
    return None


@dataclass
class PageResult:
    console: list[str] = field(default_factory=list)  # console messages, exceptions, load errors
    render_ms: float | None = None  # navigation start to every chart drawn, in the page's clock
    charts: dict[str, int] = field(default_factory=dict)  # chart id -> marks drawn
    checks: dict[str, Any] = field(default_factory=dict)  # answers to the probe expressions
    screenshot: bytes | None = None


class ReportPage:
    """One page in a fresh browser context (no state shared with other pages)."""

    def __init__(self, context: BrowserContext) -> None:
        self.context = context
        self.page: Page = context.new_page()
        self.seen: list[str] = []
        self.page.on("console", self._on_console)
        self.page.on("pageerror", lambda error: self.seen.append(f"exception: {error}"))
        self.page.on("dialog", self._on_dialog)
        self.page.on("requestfailed", self._on_request_failed)
        self.page.on("crash", lambda _: self.seen.append("crash: the page crashed"))

    def _on_console(self, message: ConsoleMessage) -> None:
        where = message.location.get("url")
        self.seen.append(
            f"console.{message.type}: {message.text}" + (f" ({where})" if where else "")
        )

    def _on_dialog(self, dialog: Dialog) -> None:
        # An alert() would block the page: record it, dismiss it, carry on.
        self.seen.append(f"dialog {dialog.type}: {dialog.message}")
        dialog.accept()

    def _on_request_failed(self, request: Request) -> None:
        self.seen.append(f"failed load: {request.url} ({request.failure})")

    def open(self, url: str, timeout_s: float = LOAD_TIMEOUT_S) -> PageResult:
        """Load ``url`` and wait until every chart is drawn; what went wrong is in ``console``."""
        from playwright.sync_api import TimeoutError as PageTimeout

        self.seen.clear()
        self.page.goto(url, timeout=timeout_s * 1000)
        try:
            self.page.wait_for_function(CHARTS_DONE, timeout=timeout_s * 1000)
            done = True
        except PageTimeout:
            self.seen.append(f"timeout: the charts were not all drawn within {timeout_s} s")
            done = False
        self.page.wait_for_timeout(LATE_MESSAGES_MS)
        result = PageResult(console=list(self.seen))
        if done:  # drawn and loaded: whichever came last
            result.render_ms = self.evaluate(RENDER_MS)
        result.charts = self.marks()
        return result

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (a promise is awaited)."""
        return self.page.evaluate(expression)

    def marks(self) -> dict[str, int]:
        """Per chart: how many marks (points, lines, bars, cells) it drew; 0 = nothing."""
        counted: dict[str, int] = self.evaluate(MARKS)
        return counted

    def problems(self) -> list[str]:
        """Console messages, exceptions, dialogs and failed loads since the last `open`."""
        self.page.evaluate("1")  # let the events that arrived meanwhile be delivered
        return list(self.seen)

    def wheel(self, x: float, y: float, delta_y: float) -> None:
        """Turn the mouse wheel with the pointer at (x, y); negative ``delta_y`` is up."""
        self.page.mouse.move(x, y)
        self.page.mouse.wheel(0, delta_y)

    def screenshot(self) -> bytes:
        """A PNG of the viewport."""
        return self.page.screenshot(type="png")

    def screenshot_from(self, selector: str, height: int) -> bytes:
        """A PNG of the page from the element ``selector`` down, ``height`` pixels tall."""
        top = self.evaluate(
            f"document.querySelector({json.dumps(selector)}).getBoundingClientRect().top"
            " + window.scrollY"
        )
        width = self.evaluate("document.documentElement.clientWidth")
        return self.page.screenshot(
            type="png", full_page=True, clip={"x": 0, "y": top, "width": width, "height": height}
        )

    def close(self) -> None:
        self.context.close()

    def __enter__(self) -> ReportPage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Browser:
    """One headless Chromium; each `page` is a fresh context, so one browser serves many tests."""

    def __init__(self) -> None:
        binary = chromium()
        if binary is None:
            raise RuntimeError(unavailable())
        from playwright.sync_api import sync_playwright

        self.playwright: Playwright = sync_playwright().start()
        try:
            self.browser: PlaywrightBrowser = self.playwright.chromium.launch(
                executable_path=binary, headless=True, args=FLAGS
            )
        except BaseException:
            self.playwright.stop()
            raise

    def page(self, width: int = 1400, height: int = 3000) -> ReportPage:
        """A new page whose viewport is ``width`` x ``height`` CSS pixels."""
        context = self.browser.new_context(viewport={"width": width, "height": height})
        return ReportPage(context)

    def close(self) -> None:
        try:
            self.browser.close()
        finally:
            self.playwright.stop()

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
    browser: Browser | None = None,
) -> PageResult:
    """Load a report (at ``fragment``, e.g. "#run-3"); evaluate ``probes`` in the page.

    In ``browser`` when given, else in a Chromium started for this report alone."""
    if browser is None:
        with Browser() as own:
            return open_report(path, fragment, probes=probes, screenshot=screenshot, browser=own)
    with browser.page() as page:
        result = page.open(path.resolve().as_uri() + fragment)
        result.checks = {name: page.evaluate(js) for name, js in (probes or {}).items()}
        if screenshot:
            result.screenshot = page.screenshot()
        return result


def screenshot_of(path: Path, selector: str, height: int, browser: Browser | None = None) -> bytes:
    """A picture of the report from the element ``selector`` down, ``height`` pixels tall."""
    if browser is None:
        with Browser() as own:
            return screenshot_of(path, selector, height, own)
    with browser.page(1400, 1000) as page:
        page.open(path.resolve().as_uri())
        return page.screenshot_from(selector, height)
