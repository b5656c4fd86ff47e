"""Brute-force oracles for the memory tests, written from the definitions, not the code.

BM25 scores every document directly from its words; cosine scores every
vector with exact rational arithmetic on its 32-bit values. Rankings are
compared with `assert_top_k`, which allows for floating-point rounding: any
item whose exact score is within `tolerance` of another may come in either
order, but everything else must match.
"""

from __future__ import annotations

import itertools
import math
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    return WORD.findall(text.casefold())


def bm25_scores(
    docs: Mapping[str, str], query: str, k1: float = 1.2, b: float = 0.75
) -> dict[str, float]:
    """Every document's BM25 score for `query`; only those sharing a query word."""
    tokenized = {doc_id: words(text) for doc_id, text in docs.items()}
    count = len(tokenized)
    if not count:
        return {}
    average = sum(len(w) for w in tokenized.values()) / count
    scores: dict[str, float] = {}
    for term in set(words(query)):
        holders = [doc_id for doc_id, w in tokenized.items() if term in w]
        if not holders:
            continue
        idf = math.log(1 + (count - len(holders) + 0.5) / (len(holders) + 0.5))
        for doc_id in holders:
            tf = tokenized[doc_id].count(term)
            length = len(tokenized[doc_id])
            part = idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average))
            scores[doc_id] = scores.get(doc_id, 0.0) + part
    return scores


def float32(values: Iterable[float]) -> list[float]:
    """The values rounded to 32-bit floats, as every vector backend stores them."""
    values = list(values)
    return list(struct.unpack(f"{len(values)}f", struct.pack(f"{len(values)}f", *values)))


def exact_cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine similarity of two vectors, from exact arithmetic, rounded once."""
    fa, fb = [Fraction(x) for x in a], [Fraction(x) for x in b]
    dot = sum((x * y for x, y in zip(fa, fb, strict=True)), Fraction(0))
    na = sum((x * x for x in fa), Fraction(0))
    nb = sum((x * x for x in fb), Fraction(0))
    if not na or not nb:
        return 0.0
    return float(dot) / math.sqrt(float(na) * float(nb))


def cosine_scores(
    vectors: Mapping[str, Sequence[float]], query: Sequence[float]
) -> dict[str, float]:
    """Every non-zero vector's cosine with `query`, both rounded to 32 bits first."""
    q = float32(query)
    return {doc_id: exact_cosine(float32(v), q) for doc_id, v in vectors.items() if any(float32(v))}


def assert_top_k(
    got: Sequence[tuple[str, float]],
    scores: Mapping[str, float],
    k: int,
    tolerance: float = 1e-9,
    *,
    cut_ties: bool = False,
) -> None:
    """`got` is the top `k` of `scores`, best first, equal scores by id, up to rounding.

    With `cut_ties`, an item left out whose oracle score equals the worst
    selected one must have a larger id: right where equal oracle scores mean
    equal computed ones (BM25: the same statistics give the same sums), but
    not for vectors, where equal exact cosines may round apart.
    """
    assert len(got) == min(k, len(scores)), (got, scores)
    ids = [doc_id for doc_id, _ in got]
    assert len(set(ids)) == len(ids), got
    for doc_id, score in got:
        assert doc_id in scores, (doc_id, scores)
        assert math.isclose(score, scores[doc_id], rel_tol=tolerance, abs_tol=tolerance), (
            doc_id,
            score,
            scores[doc_id],
        )
    # The order is by the reported scores, descending; equal ones by id.
    for (a, sa), (b, sb) in itertools.pairwise(got):
        assert sa >= sb, ("scores must not increase", got)
        if sa == sb:
            assert a < b, ("equal scores must be ordered by id", got)
    # Nothing left out scores better than the worst selected, beyond rounding.
    if got:
        worst = min(scores[i] for i in ids)
        worst_id = max(i for i in ids if scores[i] == worst)
        for doc_id, score in scores.items():
            if doc_id not in ids:
                assert score <= worst + tolerance, (doc_id, score, got)
                if cut_ties and score == worst:
                    assert doc_id > worst_id, ("a tie at the cut goes to the smaller id", got)


def expected_top_k(scores: Mapping[str, float], k: int) -> list[str]:
    """The ids of the exact top `k`, ties by id (for cases without rounding doubts)."""
    return [doc_id for doc_id, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]
