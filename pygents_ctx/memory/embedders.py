"""`Embedder`, the protocol that turns texts into vectors, and `HashingEmbedder`.

An embedder is anything with `async embed(texts) -> list[list[float]]`: one
vector per text, all of one length. Semantic selection and the vector stores
call it; plug a hosted or local model in with a few lines (see the memory
guide). `HashingEmbedder` is the default: deterministic, dependency-free and
offline, so tests and examples need no model.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Sequence
from functools import lru_cache
from typing import Final, Protocol, runtime_checkable

from pygents_ctx._checks import whole_number

__all__ = ["Embedder", "HashingEmbedder"]

_WORD: Final = re.compile(r"\w+")
_WORD_WEIGHT: Final = 1.0
_NGRAM_WEIGHT: Final = 0.5


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors for semantic search.

    `embed` returns one vector per text, in order, all of the same length,
    made of finite numbers. Texts that mean similar things should get vectors
    with a high cosine similarity.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import Embedder, HashingEmbedder
        >>> embedder: Embedder = HashingEmbedder(dimension=8)
        >>> vectors = asyncio.run(embedder.embed(["tides", "the Moon"]))
        >>> len(vectors), len(vectors[0])
        (2, 8)
    """

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in the order given."""
        ...


@lru_cache(maxsize=1 << 16)
def _bucket(feature: str, dimension: int) -> tuple[int, float]:
    """The coordinate a feature adds to, and its sign (+1 or -1), from a stable hash."""
    # crc32 is stable across processes and platforms (str hashes are salted per
    # process); the multiply spreads its bits, since only the low ones pick the bucket.
    mixed = (zlib.crc32(feature.encode("utf-8")) * 0x9E3779B1) & 0xFFFFFFFF
    return (mixed >> 1) % dimension, 1.0 if mixed & 1 else -1.0


class HashingEmbedder:
    """Feature hashing of words and character n-grams into a fixed-length vector.

    Each word of the casefolded text (a run of letters, digits or `_`) adds
    1.0 to one coordinate, and each n-gram of the word (padded with `<` and
    `>`) adds 0.5 to another; which coordinate, and with which sign, comes
    from a stable hash of the feature, so every process and machine gets the
    same vector. The vector is then scaled to length 1; a text without words
    gives all zeros.

    It is lexical: texts that share words or word pieces ("report",
    "reports") come out similar, synonyms do not. It downloads nothing and
    needs no dependency, which makes it the default and the embedder for
    tests; use a real embedding model for meaning.

    Args:
        dimension: The length of every vector (at least 1). More dimensions
            mean fewer collisions between features.
        ngram: The character n-gram length (at least 2), or 0 for words only.

    Raises:
        TypeError: An argument is not an int.
        ValueError: `dimension` is less than 1, or `ngram` is 1 or negative.

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import HashingEmbedder
        >>> embedder = HashingEmbedder(dimension=64)
        >>> a, b, c = asyncio.run(embedder.embed(["quarterly report", "reports", "hiring"]))
        >>> sum(x * y for x, y in zip(a, b)) > sum(x * y for x, y in zip(a, c))
        True
    """

    __slots__ = ("_dimension", "_ngram")

    def __init__(self, dimension: int = 256, *, ngram: int = 3) -> None:
        whole_number(dimension, "HashingEmbedder dimension", least=1)
        whole_number(ngram, "HashingEmbedder ngram", least=None)
        if ngram < 0 or ngram == 1:
            raise ValueError(
                f"HashingEmbedder ngram must be 0 (words only) or at least 2, not {ngram}"
            )
        self._dimension = dimension
        self._ngram = ngram

    @property
    def dimension(self) -> int:
        """The length of every vector."""
        return self._dimension

    @property
    def ngram(self) -> int:
        """The character n-gram length, or 0 for words only."""
        return self._ngram

    def __repr__(self) -> str:
        return f"HashingEmbedder(dimension={self._dimension}, ngram={self._ngram})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HashingEmbedder):
            return NotImplemented
        return (self._dimension, self._ngram) == (other._dimension, other._ngram)

    def __hash__(self) -> int:
        return hash((HashingEmbedder, self._dimension, self._ngram))

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length vector per text (all zeros for a text without words).

        Raises:
            TypeError: `texts` is a str, or holds something that is not a str.
        """
        if isinstance(texts, str):
            raise TypeError("HashingEmbedder.embed takes a list of texts, not one str")
        return [self.vector(text) for text in texts]

    def vector(self, text: str) -> list[float]:
        """The vector of one text, computed synchronously.

        Raises:
            TypeError: `text` is not a str.
        """
        if not isinstance(text, str):
            raise TypeError(f"HashingEmbedder embeds str, not {type(text).__name__}")
        dimension, size = self._dimension, self._ngram
        vector = [0.0] * dimension
        for word in _WORD.findall(text.casefold()):
            index, sign = _bucket(word, dimension)
            vector[index] += sign * _WORD_WEIGHT
            if size:
                padded = f"<{word}>"
                # Grams are prefixed so a 3-letter word and its gram differ.
                for start in range(max(len(padded) - size, 0) + 1):
                    index, sign = _bucket("#" + padded[start : start + size], dimension)
                    vector[index] += sign * _NGRAM_WEIGHT
        length = math.sqrt(math.fsum(x * x for x in vector))
        if length == 0.0:
            return vector
        return [x / length for x in vector]
