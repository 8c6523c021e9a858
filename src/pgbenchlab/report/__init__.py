"""Reports: the results database turned into something to send as it is.

`write_report` writes the self-contained HTML report (or the Markdown summary, or every chart
as images); `summary_text` is the terminal summary at the end of a campaign. All of them render
one view model (`views.build.load_view`), so every output shows the same numbers.

Two subpackages: `views` (records → the view model, computed once) and `render` (the view
model → HTML, Markdown, images). Data flows one way: store → views → render.
"""

from __future__ import annotations

from pathlib import Path

from pgbenchlab import files
from pgbenchlab.errors import UserError
from pgbenchlab.report.render import html, images, mail, markdown, site
from pgbenchlab.report.views.bisection import bisection_view
from pgbenchlab.report.views.build import load_view
from pgbenchlab.report.views.mail import mail_view
from pgbenchlab.report.views.site import load_site
from pgbenchlab.report.views.summary import SummaryRow, summary_rows, summary_text
from pgbenchlab.store import Store

FORMATS = ("html", "markdown", "text")
DEFAULT_HTML = "report.html"

__all__ = [
    "FORMATS",
    "SummaryRow",
    "load_view",
    "summary_rows",
    "summary_text",
    "write_bisection",
    "write_report",
    "write_site",
]


def write_report(
    store_path: Path,
    campaign: str | None = None,
    output: Path | None = None,
    fmt: str = "html",
    images_dir: Path | None = None,
    baseline: str | None = None,
) -> Path | str:
    """Write the report of a campaign (the latest by default) and return where it went.

    HTML goes to ``output`` or report.html beside the results database. Markdown and text
    (72 columns, for a mailing list) go to ``output`` if given, else they are returned.
    ``images_dir`` also receives every chart as SVG and PNG. ``baseline`` names the server
    the others are compared with (default: the first one).
    """
    if fmt not in FORMATS:
        raise UserError(f"unknown report format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    with Store.existing(store_path) as store:
        # Markdown and text need no per-second series or histograms.
        detail = fmt == "html" or images_dir is not None
        view = load_view(store, store.campaign_id(campaign), baseline=baseline, detail=detail)
        floors = store.noise_floors(view.campaign.id)
    if images_dir is not None:
        fix = "give --images a writable directory"
        with files.output_errors(images_dir, "the chart images", fix):
            images.export(view, images_dir)
    if fmt in ("markdown", "text"):
        text = markdown.render(view) if fmt == "markdown" else mail.render(mail_view(view, floors))
        if output is None:
            return text
        _write(output, text)
        return output
    target = output or store_path.parent / DEFAULT_HTML
    _write(target, html.render(view, source=store_path.name))
    return target


def _write(path: Path, text: str) -> None:
    """Write whole or not at all: a reader never opens half a report."""
    fix = "give -o a file in a writable directory"
    files.write_output(path, text.encode(), "the report", fix, make_parents=True)


def write_bisection(store_path: Path, name: str, output: Path) -> Path:
    """Write a stored bisection's page (self-contained HTML) to output."""
    with Store.existing(store_path) as store:
        found = store.bisection(name)
    if found is None:
        raise UserError(f"no bisection {name!r} in {store_path}")
    page = site.bisection_html(bisection_view(found))
    files.write_output(output, page.encode(), "the bisection's page", "give a writable --results")
    return output


def write_site(store_path: Path, directory: Path) -> Path:
    """Write the static site of a whole results database into directory; return its index.
    Every page is computed before the first is written, so a mistake writes nothing."""
    with Store.existing(store_path) as store:
        found = load_site(store)
    pages = list(site.pages(found, source=store_path.name))
    fix = "give --site a writable directory"
    for relative, text in pages:
        target = files.inside(directory, *relative.split("/"))
        files.write_output(target, text.encode(), "the site", fix, make_parents=True)
    return directory / site.INDEX
