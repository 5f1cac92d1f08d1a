"""Java ``.properties`` text and files, read as ``java.util.Properties.load`` reads them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from josefk.server.config.values import ConfigError

_NATURAL_LINE = re.compile(r"\r\n|\r|\n")
_BLANK = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """Parse ``text`` as ``java.util.Properties.load`` does (later keys win).

    Comment lines start with ``#`` or ``!``; a key ends at the first unescaped ``=``,
    ``:`` or blank; an odd number of trailing backslashes continues the line;
    ``\\t \\n \\r \\f \\uXXXX`` are escapes and any other escaped character stands
    for itself. Raises ConfigError for a malformed ``\\uXXXX``.
    """
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key_end, value_start, has_sep, escaped = len(line), len(line), False, False
        for i, c in enumerate(line):
            if not escaped and c in "=:":
                key_end, value_start, has_sep = i, i + 1, True
                break
            if not escaped and c in _BLANK:
                key_end, value_start = i, i + 1
                break
            escaped = not escaped if c == "\\" else False
        while value_start < len(line):
            c = line[value_start]
            if c not in _BLANK:
                if has_sep or c not in "=:":
                    break
                has_sep = True
            value_start += 1
        props[_unescape(line[:key_end])] = _unescape(line[value_start:])
    return props


def load_properties(path: Path) -> dict[str, str]:
    """Read and parse a properties file (UTF-8, or ISO-8859-1 as Java reads it, if not UTF-8)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from e
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text)


def _logical_lines(text: str) -> Iterator[str]:
    lines = _NATURAL_LINE.split(text)
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(_BLANK)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if i == len(lines):
                break
            more = lines[i].lstrip(_BLANK)
            i += 1
            if not more:  # after a continuation a blank line ends the logical line
                break
            line += more
        if line:  # a lone continuation followed by a blank line is no entry
            yield line


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        i += 1
        if c != "\\" or i == len(s):
            if c != "\\":
                out.append(c)
            continue
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i:i + 4]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError("Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    return "".join(out)
