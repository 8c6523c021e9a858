"""Secrets kept out of everything pgbenchlab stores or shows.

Connection strings are read with libpq's own parser (through psycopg), so a password is found
however it is written (key=value or URI, quoted, escaped, percent-encoded) and shown again
re-rendered with the secret masked. Settings whose value is a connection string (such as
``primary_conninfo``) are masked the same way. The plan's text is kept only once no secret is
left in it in any form that TOML or a connection string could spell it.
"""

from __future__ import annotations

import functools
import json
import re
import tomllib
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import quote

import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgbenchlab import tomltext

MASK = "********"
# libpq marks passwords as secret ("*"); SCRAM keys stand in for the password but are marked
# only as debug options. Named here too in case an older libpq lacks a keyword.
_ALSO_SECRET = frozenset({"password", "sslpassword", "scram_client_key", "scram_server_key"})
WITHHELD = "# the plan's text is withheld: it holds a secret that could not be masked in place\n"


@functools.cache
def libpq_options() -> tuple[pq.ConninfoOption, ...]:
    """libpq's connection keywords, with their environment variables and display flags."""
    return tuple(pq.Conninfo.get_defaults())


@functools.cache
def secret_keywords() -> frozenset[str]:
    marked = {o.keyword.decode() for o in libpq_options() if o.dispchar == b"*"}
    return frozenset(marked | _ALSO_SECRET)


def parse_conninfo(text: str) -> dict[str, str] | None:
    """text as libpq reads a connection string, or None when it is not one."""
    try:
        return {k: str(v) for k, v in conninfo_to_dict(text).items()}
    except psycopg.ProgrammingError:
        return None


def _secret_values(params: Mapping[str, str]) -> list[str]:
    return [v for k, v in params.items() if k in secret_keywords() and v]


def secrets_in(name: str, value: str) -> list[str]:
    """The secrets a setting (or plan value) named `name` holds: a connection string's passwords;
    all of a ``…conninfo`` value libpq cannot read, as its password cannot be told apart."""
    params = parse_conninfo(value)
    if params is None:
        return [value] if value and name.lower().endswith("conninfo") else []
    return _secret_values(params)


def redact_conninfo(text: str) -> str:
    """A connection string with its secrets masked (re-rendered as key=value when it had any)."""
    params = parse_conninfo(text)
    if params is None or not _secret_values(params):
        return text
    masked = {k: MASK if k in secret_keywords() and v else v for k, v in params.items()}
    return make_conninfo("", **{k: masked[k] for k in sorted(masked, key=_written_at(text))})


def _written_at(text: str) -> Callable[[str], int]:
    """Where a keyword is written in a key=value string, to keep the user's order."""

    def position(keyword: str) -> int:
        found = re.search(rf"(?:^|\s){re.escape(keyword)}\s*=", text)
        return found.start() if found else len(text)

    return position


def redact_setting(name: str, value: str) -> str:
    if not secrets_in(name, value):
        return value
    return MASK if parse_conninfo(value) is None else redact_conninfo(value)


def redact_settings(settings: Mapping[str, str]) -> dict[str, str]:
    return {name: redact_setting(name, value) for name, value in settings.items()}


# -- the plan's text ----------------------------------------------------------------------------

# TOML strings (multi-line ones may end with up to two extra quotes) and comments, leftmost first,
# so a quote inside a comment or a '#' inside a string is never taken for the other.
_TOKEN = re.compile(
    r"""(?P<comment>\#[^\n]*)
    | (?P<string>\"\"\"(?:[^\\]|\\.)*?\"\"\"(?!\")
      | '''.*?'''(?!')
      | "(?:[^"\\\n]|\\.)*"
      | '[^'\n]*')""",
    re.DOTALL | re.VERBOSE,
)


def redact_plan_text(text: str) -> str:
    """The plan's text as stored: every string holding a secret re-rendered without it, then any
    other spelling of a secret (in a comment, say) masked; withheld when one still shows."""
    keyed = _keyed_strings(tomllib.loads(text))
    found = sorted(
        {s for key, value in keyed for s in secrets_in(key, value)}, key=len, reverse=True
    )
    if not found:
        return text
    return WITHHELD if _leaks(redacted := _redact_text(text, found), found) else redacted


def _redact_text(text: str, found: list[str]) -> str:
    """Strings and comments redacted token by token, the text between them (keys, numbers) by
    spelling. A connection string is masked in its values only: a secret that happens to be part
    of a keyword ("passwo" of "password") must not break the string; the leak check then sees
    it and withholds the text."""
    parts: list[str] = []
    end = 0
    for match in _TOKEN.finditer(text):
        parts.append(_mask_spellings(text[end : match.start()], found))
        parts.append(_redact_token(match, found))
        end = match.end()
    parts.append(_mask_spellings(text[end:], found))
    return "".join(parts)


def _keyed_strings(node: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """Every string of a TOML document with the key it is under (a list's items: the list's)."""
    if isinstance(node, dict):
        for name, value in node.items():
            yield from _keyed_strings(value, str(name))
    elif isinstance(node, list):
        for item in node:
            yield from _keyed_strings(item, key)
    elif isinstance(node, str):
        yield key, node


def _redact_token(match: re.Match[str], found: list[str]) -> str:
    token = match.group()
    if match.group("comment") is not None:
        return _mask_spellings(token, found)
    try:
        value = tomllib.loads(f"v = {token}")["v"]
    except tomllib.TOMLDecodeError:  # not a string after all: the leak check has the last word
        return token
    redacted = _mask_values(value, found)
    return token if redacted == value else tomltext.string(redacted)


def _mask_values(value: str, found: list[str]) -> str:
    """A plan string without its secrets: a connection string re-rendered with its secret
    keywords masked and any secret inside another value masked; any other string masked
    wherever a secret shows."""
    params = parse_conninfo(value)
    if not params:
        return _masked(value, found)
    masked = {
        k: MASK if k in secret_keywords() and v else _masked(v, found) for k, v in params.items()
    }
    if masked == params:
        return value
    return make_conninfo("", **{k: masked[k] for k in sorted(masked, key=_written_at(value))})


def _masked(text: str, found: list[str]) -> str:
    for secret in found:
        text = text.replace(secret, MASK)
    return text


def _spellings(secret: str) -> set[str]:
    """How a secret may be written in a plan: as is, escaped for TOML or for a connection
    string (or both), and percent-encoded as in a URI."""
    libpq = secret.replace("\\", "\\\\").replace("'", "\\'")
    forms = {secret, libpq, quote(secret, safe=""), quote(secret)}
    return forms | {tomltext.string(f)[1:-1] for f in forms} | {json.dumps(f)[1:-1] for f in forms}


def _mask_spellings(text: str, found: list[str]) -> str:
    for secret in found:
        for spelling in sorted(_spellings(secret), key=len, reverse=True):
            text = text.replace(spelling, MASK)
    return text


def _leaks(text: str, found: list[str]) -> bool:
    """Whether a secret still shows: spelled out in the text, or in a string TOML decodes."""
    if any(spelling in text for secret in found for spelling in _spellings(secret)):
        return True
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return True
    keyed = list(_keyed_strings(document))
    return any(secret in value for _, value in keyed for secret in found) or any(
        secret != MASK for key, value in keyed for secret in secrets_in(key, value)
    )
