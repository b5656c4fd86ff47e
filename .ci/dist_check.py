"""Build the sdist and the wheel, install the wheel in a fresh virtualenv, run the quickstart.

Usage: python .ci/dist_check.py DIST_DIR

The wheel is built from the sdist (`python -m build`), so a file the sdist
forgets fails here. The new virtualenv gets the wheel with every optional
extra the project declares (but the development ones); each extra's modules
must import, and the README's examples (its quickstart) and `examples/demo.py`
run from a directory outside the checkout, importing the installed package. A
fresh machine needs only Python and pip: the packages come from the index (or
pip's cache).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# What each extra is for, as one import statement that needs it.
EXTRA_IMPORTS = {
    "openai": "import openai; from pygents_ctx import OpenAIModel",
    "anthropic": "import anthropic; from pygents_ctx import AnthropicModel",
    "gemini": "from google import genai; from pygents_ctx import GeminiModel",
    "tiktoken": "import tiktoken; from pygents_ctx import TiktokenCounter",
    "postgres": "import psycopg; from pygents_ctx import connect_postgres",
    "numpy": "import numpy",
    "vec": "import sqlite_vec",
    "openai-agents": "from pygents_ctx.integrations.openai_agents import ContextStoreSession",
    "pydantic-ai": "from pygents_ctx.integrations.pydantic_ai import ContextStoreHistory",
    "service": "import openai, starlette, uvicorn",
    "mcp": "import mcp; from pygents_ctx.integrations.mcp import MCPClient",
    "otel": "import opentelemetry.trace; from pygents_ctx.integrations.tracing import instrument",
    "langgraph": "from pygents_ctx.integrations.langgraph import ContextStoreSaver",
    "dbos": "import dbos; from pygents_ctx.integrations.dbos import durable_run",
}
DEVELOPMENT = {"test", "dev", "docs"}


def run(*command: str | Path, cwd: Path = ROOT) -> None:
    print("+", " ".join(map(str, command)), flush=True)
    subprocess.run(list(map(str, command)), cwd=cwd, check=True)


def main(dist: Path) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = sorted(set(project["optional-dependencies"]) - DEVELOPMENT)
    unknown = sorted(set(extras) ^ set(EXTRA_IMPORTS))
    if unknown:
        sys.exit(f"extras and EXTRA_IMPORTS in .ci/dist_check.py differ: {unknown}")
    for old in dist.glob("pygents_ctx-*"):
        old.unlink()
    run(sys.executable, "-m", "build", "--outdir", dist)
    (wheel,) = dist.glob("pygents_ctx-*.whl")
    (sdist,) = dist.glob("pygents_ctx-*.tar.gz")
    print(f"built {sdist.name} and {wheel.name}")
    with tempfile.TemporaryDirectory() as tmp:
        here = Path(tmp)
        venv.create(here / "venv", with_pip=True)
        python = here / "venv" / "bin" / "python"
        run(python, "-m", "pip", "install", "-q", f"{wheel.resolve()}[{','.join(extras)}]")
        checks = "\n".join(EXTRA_IMPORTS[extra] for extra in extras)
        where = "import pygents_ctx, sys; print('imported from', pygents_ctx.__file__)"
        run(python, "-c", f"{checks}\n{where}", cwd=here)
        run(here / "venv" / "bin" / "pygents-ctx", "--help", cwd=here)
        run(python, ROOT / ".ci" / "readme_blocks.py", ROOT / "README.md", cwd=here)
        run(python, ROOT / "examples" / "demo.py", cwd=here)
        run(python, ROOT / "examples" / "demo.py", cwd=here)  # the second run continues
    print(f"the wheel installs with {', '.join(extras)} and runs the README and the demo")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
