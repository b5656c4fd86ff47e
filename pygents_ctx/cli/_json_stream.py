"""An incremental reader of one JSON object whose values may be very long lists.

The standard library and orjson parse a whole document at once; a session file
of a million messages would be held in memory several times over. This
reader keeps a buffer of about a megabyte: it finds where each value ends (a
scan of brackets and strings, in C through `re`) and hands that value's bytes
to orjson, so each top-level key and each element of a list is parsed on its
own, with orjson's rules (UTF-8, no NaN, 64-bit integers).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import IO, Any, Final

import orjson

__all__ = ["JsonStreamError", "NotAnObjectError", "ObjectReader"]

_CHUNK: Final = 1 << 20
# A whole string (or one cut by the buffer's end), or a bracket: the scan's tokens.
_TOKENS: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)
_QUOTE: Final = ord('"')
_OPENING: Final = frozenset(b"[{")
_STRING_REST: Final = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # after the quote
_SCALAR: Final = re.compile(rb"[^,:\[\]{}\s]*")
_SPACE: Final = re.compile(rb"[ \t\n\r]*")
_TYPE_OF_FIRST: Final = {ord("["): "list", ord('"'): "str", ord("t"): "bool", ord("f"): "bool"}


class JsonStreamError(ValueError):
    """The bytes are not valid JSON (or not an object); the message says where."""


class NotAnObjectError(JsonStreamError):
    """The JSON is valid so far but is not an object; `kind` names what it is."""

    def __init__(self, kind: str) -> None:
        super().__init__(f"not an object: a {kind}")
        self.kind = kind


class ObjectReader:
    """Read a JSON object member by member from a binary stream.

    `start()`, then `key()` until it returns None; after each key, either
    `value()` or, for a list, `items()` (which also takes any other value and
    reports it). `finish()` checks that nothing but whitespace follows.
    """

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._buf = bytearray()
        self._pos = 0
        self._dropped = 0  # bytes dropped from the front of the buffer
        self._eof = False
        self._first = True

    # -- the buffer ------------------------------------------------------------------

    def _more(self) -> bool:
        if self._eof:
            return False
        chunk = self._stream.read(_CHUNK)
        if not chunk:
            self._eof = True
            return False
        self._buf += chunk
        return True

    def _compact(self) -> None:
        # Only between values: a scan in progress holds indexes into the buffer.
        if self._pos > _CHUNK:
            del self._buf[: self._pos]
            self._dropped += self._pos
            self._pos = 0

    def _error(self, what: str, at: int | None = None) -> JsonStreamError:
        where = self._dropped + (self._pos if at is None else at)
        return JsonStreamError(f"{what} at byte {where}")

    def _peek(self) -> int | None:
        while True:
            self._pos = _SPACE.match(self._buf, self._pos).end()  # type: ignore[union-attr]
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._more():
                return None

    def _expect(self, allowed: bytes, what: str) -> int:
        found = self._peek()
        if found is None:
            raise self._error(f"unexpected end of data, expected {what}")
        if found not in allowed:
            raise self._error(f"expected {what}, found {chr(found)!r}")
        self._pos += 1
        return found

    def _value_bytes(self) -> bytes:
        self._compact()
        first = self._peek()
        if first is None:
            raise self._error("unexpected end of data, expected a value")
        start = self._pos
        if first in b"[{":
            end = self._container_end(start)
        elif first == ord('"'):
            end = self._string_end(start)
        else:
            end = self._scalar_end(start)
        self._pos = end
        return bytes(self._buf[start:end])

    def _string_end(self, quote: int) -> int:
        while True:
            found = _STRING_REST.match(self._buf, quote + 1)
            if found is not None:
                return found.end()
            if not self._more():
                raise self._error("unterminated string", quote)

    def _scalar_end(self, start: int) -> int:
        while True:
            end = _SCALAR.match(self._buf, start).end()  # type: ignore[union-attr]
            if end < len(self._buf) or not self._more():
                break
        if end == start:
            raise self._error(f"unexpected {chr(self._buf[start])!r}")
        return end

    def _container_end(self, start: int) -> int:
        depth, at, size = 0, start, len(self._buf)
        while True:
            resume, token = size, None
            for token in _TOKENS.finditer(self._buf, at):
                first, end = self._buf[token.start()], token.end()
                if first == _QUOTE:
                    if end == size and not self._eof:  # perhaps cut by the buffer's end
                        resume = token.start()
                        break
                elif first in _OPENING:
                    depth += 1
                else:
                    depth -= 1
                    if depth == 0:
                        return end
            token = None  # a match holds the buffer, which cannot grow while it is held
            if not self._more():
                raise self._error("unexpected end of data inside a list or object", start)
            at, size = resume, len(self._buf)

    @staticmethod
    def _parse(data: bytes) -> Any:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise JsonStreamError(str(exc)) from None

    # -- the object ------------------------------------------------------------------

    def start(self) -> None:
        """Read the opening brace.

        Raises:
            JsonStreamError: The data is empty or not an object; the message
                names the type it is (`not a list`).
        """
        first = self._peek()
        if first is None:
            raise self._error("no data, expected a JSON object")
        if first != ord("{"):
            kind = _TYPE_OF_FIRST.get(first)
            if kind is None:
                kind = type(self._parse(self._value_bytes())).__name__
            raise NotAnObjectError(kind)
        self._pos += 1

    def key(self) -> str | None:
        """The next member's key, or None at the closing brace."""
        if self._first:
            self._first = False
            if self._peek() == ord("}"):
                self._pos += 1
                return None
        elif self._expect(b",}", "',' or '}'") == ord("}"):
            return None
        if self._peek() != ord('"'):
            raise self._error("expected a string key")
        key = self._parse(self._value_bytes())
        self._expect(b":", "':'")
        return str(key)

    def is_list(self) -> bool:
        """Whether the current member's value is a list."""
        return self._peek() == ord("[")

    def value(self) -> Any:
        """The current member's value, parsed whole."""
        return self._parse(self._value_bytes())

    def skip(self) -> None:
        """Pass over the current member's value without parsing it."""
        self._value_bytes()

    def items(self) -> Iterator[Any]:
        """The current member's list, one parsed element at a time (call only if `is_list()`)."""
        self._expect(b"[", "'['")
        if self._peek() == ord("]"):
            self._pos += 1
            return
        while True:
            yield self._parse(self._value_bytes())
            if self._expect(b",]", "',' or ']'") == ord("]"):
                return

    def finish(self) -> None:
        """Check that only whitespace follows the object."""
        if self._peek() is not None:
            raise self._error("unexpected data after the object")
