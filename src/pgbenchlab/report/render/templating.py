"""The pages' templates (templates/*.html, package data) in one Jinja2 environment.

Autoescaping is on for every template: a value (a server's name, an error, a setting) reaches
the page only as text. The filters below are the only way raw text enters a page, each made
safe for the element it goes into: JSON and JavaScript inside <script>, CSS inside <style>.
"""

from __future__ import annotations

import math
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from pgbenchlab import jsontext

_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def script_json(data: Any) -> str:
    """JSON safe inside a <script> element: no "</script>", no "<!--", valid JavaScript."""
    try:
        text = _dumps(data)
    except ValueError:  # a NaN or an infinity somewhere: rare, so cleaned only then
        text = _dumps(_finite(data))
    for raw, escaped in _JSON_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text


def _dumps(data: Any) -> str:
    return jsontext.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _finite(data: Any) -> Any:
    """NaN and infinities (not JSON) become null."""
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_finite(v) for v in data]
    return data


def inline_script(code: str) -> str:
    # "<\/script" means the same to JavaScript in strings and regular expressions.
    return code.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")


def inline_style(css: str) -> str:
    # A style sheet has no string a reader could fill; the end tag is all that could end it.
    return css.replace("</style", "<\\/style").replace("</STYLE", "<\\/STYLE")


_ENVIRONMENT = Environment(
    loader=PackageLoader("pgbenchlab.report.render", "templates"),
    autoescape=True,
    undefined=StrictUndefined,  # a name missing from a page's context is a bug, not a blank
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
_ENVIRONMENT.filters.update(
    {
        "fmt": format,  # {{ share|fmt(".1%") }}: Python's format specifications
        "script_json": lambda data: Markup(script_json(data)),
        "script_text": lambda code: Markup(inline_script(code)),
        "style_text": lambda css: Markup(inline_style(css)),
    }
)


def render(template: str, **context: Any) -> str:
    """The named template (under templates/) rendered with ``context``."""
    return _ENVIRONMENT.get_template(template).render(**context)
