"""The screenshots of guides/cli.md's Viewer section, from the tests' store.

    python -m tests.viewer.screenshots [FOLDER]    (default: guides/img)

Builds the store the viewer's tests use (ModelLoop runs with tool calls, an
image, two compactions, usage records, memory stores), serves it, and saves
one PNG per view with headless Chromium.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

from pygents_ctx.cli.viewer import SQLiteSource, Viewer
from tests.viewer.browser import find_chromium, screenshot
from tests.viewer.conftest import PRICES, build_sqlite, serving
from tests.viewer.store import saved_agent

ROOT = Path(__file__).resolve().parents[2]
VIEWS = {
    "sessions": ("/", "1280,520"),
    "transcript": ("/session/trip", "1280,900"),
    "archive": ("/session/trip/archive", "1280,900"),
    "window": ("/session/trip/window?strategy=clear-results:1,fit:200", "1280,1760"),
    "spend": ("/session/trip/spend?budget=1000", "1280,1280"),
    "memory": ("/memory", "1280,820"),
}


def main(folder: Path) -> None:
    chromium = find_chromium()
    if chromium is None:
        sys.exit("no Chromium here: run .ci/chromium")
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as directory:
        path = build_sqlite(Path(directory) / "agent.db")
        os.chdir(directory)  # the header shows the path as given: agent.db
        Path("agent.agent.json").write_bytes(asyncio.run(saved_agent()))
        viewer = Viewer(SQLiteSource(path.name), PRICES, agents=("agent.agent.json",))
        with serving(viewer) as server:
            for name, (page, size) in VIEWS.items():
                shot = screenshot(
                    chromium, server.url.rstrip("/") + page, folder / f"viewer-{name}.png", size
                )
                print(shot.relative_to(ROOT) if shot.is_relative_to(ROOT) else shot)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "guides" / "img")
