"""`HashingEmbedder`: deterministic, offline, unit-length feature hashing."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from typing import Any

import pytest

from pygents_ctx import Embedder, HashingEmbedder


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


async def test_vectors_have_the_dimension_and_unit_length() -> None:
    vectors = await HashingEmbedder(dimension=48).embed(["Moon and tides", "x", "ÜBER straße"])

    assert [len(v) for v in vectors] == [48, 48, 48]
    assert all(math.isclose(math.fsum(x * x for x in v), 1.0) for v in vectors)


async def test_a_text_without_words_gives_zeros() -> None:
    assert await HashingEmbedder(dimension=4).embed(["", " ?! ", "—"]) == [[0.0] * 4] * 3


def test_the_same_text_gives_the_same_vector_whatever_the_case() -> None:
    embedder = HashingEmbedder()

    assert embedder.vector("Quarterly REPORT") == embedder.vector("quarterly report")


def test_vectors_are_the_same_in_every_process() -> None:
    code = (
        "from pygents_ctx import HashingEmbedder;"
        "print(HashingEmbedder(dimension=16).vector('Moon and tides'))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "random")
    }

    assert len(outputs) == 1
    assert outputs.pop().strip() == str(HashingEmbedder(dimension=16).vector("Moon and tides"))


def test_texts_sharing_words_or_word_pieces_are_closer() -> None:
    embedder = HashingEmbedder()
    report, reports, hiring = (embedder.vector(t) for t in ("report", "reports", "hiring"))

    assert cosine(report, reports) > 0.4  # 5 of their 3-grams are shared
    assert abs(cosine(report, hiring)) < 0.2


def test_words_only_ignores_word_pieces() -> None:
    embedder = HashingEmbedder(dimension=4096, ngram=0)
    report, reports = embedder.vector("report"), embedder.vector("reports")

    assert cosine(report, report) == pytest.approx(1.0)
    assert cosine(report, reports) == pytest.approx(0.0)
    assert sum(1 for x in report if x) == 1


def test_it_is_an_embedder_and_a_value() -> None:
    embedder = HashingEmbedder(dimension=8, ngram=4)

    assert isinstance(embedder, Embedder)
    assert (embedder.dimension, embedder.ngram) == (8, 4)
    assert embedder == HashingEmbedder(dimension=8, ngram=4)
    assert embedder != HashingEmbedder(dimension=8)
    assert embedder != "HashingEmbedder"
    assert len({embedder, HashingEmbedder(dimension=8, ngram=4)}) == 1
    assert repr(embedder) == "HashingEmbedder(dimension=8, ngram=4)"


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"dimension": 0}, ValueError, "dimension must be at least 1"),
        ({"dimension": 2.0}, TypeError, "dimension must be an int"),
        ({"ngram": 1}, ValueError, "ngram must be 0"),
        ({"ngram": -2}, ValueError, "ngram must be 0"),
        ({"ngram": True}, TypeError, "ngram must be an int"),
    ],
)
def test_bad_arguments_are_refused(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        HashingEmbedder(**kwargs)


async def test_embed_takes_a_list_of_str() -> None:
    embedder = HashingEmbedder()
    with pytest.raises(TypeError, match="a list of texts, not one str"):
        await embedder.embed("moon")
    with pytest.raises(TypeError, match="embeds str, not int"):
        await embedder.embed(["moon", 3])  # type: ignore[list-item]
