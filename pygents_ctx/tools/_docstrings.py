"""Reading a docstring for a tool definition: its description, and each parameter's.

Three styles are understood, and may not be mixed within one docstring:

- Google: `Args:` (or `Arguments:`, `Parameters:`, `Keyword Args:`,
  `Attributes:`, ...), one `name (type): text` entry per parameter, indented
  continuation lines; `Returns:` / `Yields:`.
- NumPy: a `Parameters` heading underlined with dashes, entries `name : type`
  with the text indented below; `Returns` / `Yields` likewise.
- reST: `:param name: text` (or `:param type name:`, `:arg`, `:keyword`,
  `:ivar`), `:returns: text`.

The description is the text before the first section: the summary and the
paragraphs after it, without the `Args` / `Returns` / `Raises` / `Examples`
blocks a model has no use for.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Final

__all__ = ["Docstring", "parse_docstring"]

_PARAMETER_SECTIONS: Final = frozenset(
    {
        "args",
        "arguments",
        "parameters",
        "params",
        "keyword args",
        "keyword arguments",
        "kwargs",
        "other parameters",
        "attributes",
    }
)
_RETURN_SECTIONS: Final = frozenset({"returns", "return", "yields", "yield"})
# Headings that end the description; their text is for readers of the code.
_OTHER_SECTIONS: Final = frozenset(
    {
        "raises",
        "raise",
        "exceptions",
        "except",
        "examples",
        "example",
        "note",
        "notes",
        "warning",
        "warnings",
        "warns",
        "see also",
        "references",
        "todo",
        "methods",
    }
)
_SECTIONS: Final = _PARAMETER_SECTIONS | _RETURN_SECTIONS | _OTHER_SECTIONS

_GOOGLE_HEADING: Final = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_NUMPY_UNDERLINE: Final = re.compile(r"^\s*-{3,}\s*$")
_GOOGLE_ENTRY: Final = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_NUMPY_ENTRY: Final = re.compile(r"^\*{0,2}(\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::.*)?$")
_REST_FIELD: Final = re.compile(r"^:(\w+)((?:\s+[^:]+?)?)\s*:\s*(.*)$")
_REST_PARAMETER: Final = frozenset(
    {"param", "parameter", "arg", "argument", "key", "keyword", "ivar", "var"}
)
_REST_RETURN: Final = frozenset({"returns", "return", "yields", "yield"})
# `str: The greeting.`: a return entry's type, before its text (no spaces in it).
_RETURN_TYPE: Final = re.compile(r"^[\w.\[\], |]*\w[\])]?:\s+(?=\S)")


@dataclass(frozen=True)
class Docstring:
    """What a docstring says, for a tool definition.

    Attributes:
        description: The text before the first section, or None when there is none.
        parameters: Each documented parameter's text, by name.
        returns: What the `Returns` (or `Yields`) section says, or None.
    """

    description: str | None = None
    parameters: dict[str, str] = field(default_factory=dict)
    returns: str | None = None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _join(lines: list[str]) -> str:
    """Lines of one entry as text: lines joined by spaces, paragraphs by a newline."""
    paragraphs: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            paragraphs[-1].append(line.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return "\n".join(" ".join(p) for p in paragraphs if p)


def _heading(lines: list[str], index: int) -> tuple[str, int] | None:
    """`(section name, lines it takes)` when a section starts at `lines[index]`."""
    line = lines[index]
    if _indent(line) != 0:
        return None
    following = lines[index + 1] if index + 1 < len(lines) else ""
    name = line.strip().lower()
    if name in _SECTIONS and _NUMPY_UNDERLINE.match(following):
        return name, 2
    google = _GOOGLE_HEADING.match(line)
    if google and google.group(1).lower() in _SECTIONS:
        return google.group(1).lower(), 1
    if _REST_FIELD.match(line):
        return ":", 0
    return None


def _entries(body: list[str], numpy: bool) -> list[tuple[str, list[str]]]:
    """The `(first line, further lines)` of each entry of a section's body."""
    base = min((_indent(line) for line in body if line.strip()), default=0)
    entries: list[tuple[str, list[str]]] = []
    for line in body:
        if line.strip() and _indent(line) == base:
            entries.append((line.strip(), []))
        elif entries:
            entries[-1][1].append(line)
    return entries


def _parameters(body: list[str], numpy: bool, into: dict[str, str]) -> None:
    for first, rest in _entries(body, numpy):
        if numpy:
            found = _NUMPY_ENTRY.match(first)
            if found:
                text = _join(rest)
                for name in found.group(1).split(","):
                    into.setdefault(name.strip().lstrip("*"), text)
            continue
        google = _GOOGLE_ENTRY.match(first)
        if google:
            into.setdefault(google.group(1), _join([google.group(2), *rest]))


def _returns(body: list[str], numpy: bool) -> str | None:
    if numpy:  # `type` lines at the base, the text indented under them
        text = _join([line for first, rest in _entries(body, numpy) for line in rest])
    else:
        text = _RETURN_TYPE.sub("", _join(body), count=1)
    return text or None


def _rest_fields(lines: list[str], parameters: dict[str, str]) -> str | None:
    """Read reST fields (`:param x: ...`) into `parameters`; the `:returns:` text."""
    returns = None
    fields: list[tuple[str, str, list[str]]] = []
    for line in lines:
        found = _REST_FIELD.match(line) if _indent(line) == 0 else None
        if found:
            fields.append((found.group(1), found.group(2).strip(), [found.group(3)]))
        elif fields:
            fields[-1][2].append(line)
    for kind, argument, text_lines in fields:
        text = _join(text_lines)
        if kind in _REST_PARAMETER and argument:
            parameters.setdefault(argument.split()[-1].lstrip("*"), text)
        elif kind in _REST_RETURN and returns is None:
            returns = text or None
    return returns


def parse_docstring(doc: str | None) -> Docstring:
    """Read `doc` (a docstring, indented or not) in whichever style it is written."""
    if not doc or not doc.strip():
        return Docstring()
    lines = inspect.cleandoc(doc).splitlines()
    start = next((i for i in range(len(lines)) if _heading(lines, i)), len(lines))
    description = _join_description(lines[:start])
    parameters: dict[str, str] = {}
    returns: str | None = None
    rest = lines[start:]
    if rest and _REST_FIELD.match(rest[0]):
        returns = _rest_fields(rest, parameters)
        return Docstring(description, parameters, returns)
    index = 0
    while index < len(rest):
        found = _heading(rest, index)
        if found is None or found[0] == ":":
            index += 1
            continue
        name, taken = found
        end = index + taken
        while end < len(rest) and not _heading(rest, end):
            end += 1
        body = rest[index + taken : end]
        numpy = taken == 2
        if name in _PARAMETER_SECTIONS:
            _parameters(body, numpy, parameters)
        elif name in _RETURN_SECTIONS and returns is None:
            returns = _returns(body, numpy)
        index = end
    return Docstring(description, parameters, returns)


def _join_description(lines: list[str]) -> str | None:
    text = "\n".join(lines).strip()
    return text or None
