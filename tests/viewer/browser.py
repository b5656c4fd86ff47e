"""Headless Chromium for the viewer's tests: the DOM a page builds, and screenshots.

Debian's `chromium` package (`.ci/chromium` installs it; `make test` runs that).
Each call is a fresh browser with a profile of its own, so calls may run at once.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

__all__ = ["Dom", "Element", "find_chromium", "load", "screenshot"]

NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    """The Chromium on PATH, or None."""
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _run(binary: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        return subprocess.run(
            [
                binary, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
                "--no-first-run", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                *arguments,
            ],
            capture_output=True, text=True, timeout=90, check=True,
        )  # fmt: skip


@dataclass
class Element:
    """An element of the DOM: its tag, attributes, and the text directly inside it."""

    tag: str
    attrs: dict[str, str]
    text: str = ""

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


class Dom(HTMLParser):
    """The elements of a page's DOM, in document order, and its visible text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self.words: list[str] = []
        self._open: list[Element] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {name: value or "" for name, value in attrs})
        self.elements.append(element)
        if tag not in ("img", "input", "br", "meta", "link", "rect", "line"):
            self._open.append(element)

    def handle_endtag(self, tag: str) -> None:
        for index in range(len(self._open) - 1, -1, -1):
            if self._open[index].tag == tag:
                del self._open[index:]
                return

    def handle_data(self, data: str) -> None:
        if any(element.tag in ("style", "title", "head") for element in self._open):
            return  # not what a person sees on the page
        if self._open:
            self._open[-1].text += data
        self.words.extend(data.split())

    @property
    def text(self) -> str:
        return " ".join(self.words)

    def all(self, tag: str, cls: str = "") -> list[Element]:
        return [e for e in self.elements if e.tag == tag and (not cls or cls in e.classes)]

    def by_id(self, wanted: str) -> Element | None:
        return next((e for e in self.elements if e.attrs.get("id") == wanted), None)


def load(binary: str, url: str) -> Dom:
    """The DOM Chromium builds from `url` (after loading; the viewer runs no script)."""
    dom = Dom()
    dom.feed(_run(binary, "--dump-dom", url).stdout)
    dom.close()
    return dom


def screenshot(binary: str, url: str, path: Path, size: str = "1280,900") -> Path:
    """Save what Chromium shows of `url` in a window of `size` as a PNG at `path`."""
    _run(binary, f"--screenshot={path.absolute()}", f"--window-size={size}", url)
    return path
