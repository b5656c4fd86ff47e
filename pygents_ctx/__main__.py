"""`python -m pygents_ctx`: the `pygents-ctx` command line (see `pygents_ctx.cli`)."""

from __future__ import annotations

from pygents_ctx.cli import main

__all__: list[str] = []

# Imported as a module (the docs test imports every module), it must not run.
if __name__ == "__main__":
    raise SystemExit(main())
