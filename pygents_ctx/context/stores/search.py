"""Searching a session: what `ContextStore.search` finds, and how it ranks it.

A search looks at the whole session, the archive (what compaction took out)
and the live history, so nothing a strategy dropped or a compaction archived
is out of reach. Every store follows the same rules:

- **What is searched** (`indexed_text`): the text of a message's text blocks,
  the text of its tool results, and the name and the string values of the
  input of its tool calls (`search_text`, what a hit shows); and, for a tool
  result offloaded to a blob store, the words of its whole text
  (`OffloadedResult.words`, the first `INDEXED_CHARACTERS` characters of its
  distinct words, kept in the stub when it is made), so a search finds what
  only the blob holds and returns the message with the stub. Thinking,
  images, ids and metadata are not searched.
- **Words**: runs of letters and digits, lowercased, accents removed
  (`words`); everything else separates them. SQLite's FTS5 `unicode61`
  tokenizer splits text the same way; the PostgreSQL and memory stores use
  `words` itself.
- **The query** is plain text, never a query language: characters FTS5 or
  PostgreSQL would read as syntax are only separators. Its words are looked
  up, less common English function words (`STOP_WORDS`: "what", "is",
  "the", ...), unless the query has no other words.
- **Ranking**: messages holding every word looked up come first, then those
  holding some of them; within each group by relevance (BM25 in SQLite and the
  memory store, `ts_rank` in PostgreSQL), ties newest first. `HistoryHit.score`
  is that relevance, larger for a better match: compare scores within one
  search and one group only.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from pygents_ctx._checks import LARGEST, SMALLEST, whole_number
from pygents_ctx.context.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock

# Public: these. The helpers below (`words`, `check_search`, `rank`, ...) serve the stores.
__all__ = [
    "MAX_SEARCH_LIMIT",
    "MAX_SEARCH_QUERY",
    "HistoryHit",
    "search_text",
]

INDEXED_CHARACTERS: Final = 100_000
"""How much of a text's words a search indexes, in characters: an offloaded result's
distinct words (`offloaded_words`), a message's words in PostgreSQL (whose `tsvector`
holds at most 1 MB)."""

MAX_SEARCH_QUERY: Final = 1_000
"""The longest query `search` takes, in characters."""

MAX_SEARCH_LIMIT: Final = 100
"""The most hits one `search` returns."""

# A word: letters and digits (and private-use characters, as FTS5's unicode61 has it).
_WORD: Final = re.compile(r"[^\W_]+|[\ue000-\uf8ff]+")
STOP_WORDS: Final = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "s",
        "t",
        "d",
        "ll",
        "m",
        "re",
        "ve",
    ]
)
"""Words a query does not look up (unless it has no others): they say little about a message."""

# BM25's usual constants, the ones SQLite's FTS5 uses.
_K1: Final = 1.2
_B: Final = 0.75


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryHit:
    """One message `ContextStore.search` found.

    Attributes:
        message: The message.
        archived: True if it is in the archive (compaction took it out of the
            live history), False if it is live.
        position: Where it sits in its part of the session, an order key: a
            larger position is later in the live history (`archived=False`) or
            was archived later (`archived=True`). The memory store counts from
            0 in each part; the database stores use their own keys, which may
            have gaps (and, in the live history, start below 0).
        id: The message's id in the store, kept while it moves from the live
            history to the archive (what a summary's `summary_of` names; see
            `summary_covers`); None for a store that keeps no ids.
        score: How well it matches the query: larger is better, comparable
            within one search only.
        run_id: The run that appended it, or None.

    Examples:
        >>> from pygents_ctx import Message
        >>> hit = HistoryHit(
        ...     message=Message("user", "The gate code is 4417."),
        ...     archived=True, position=3, id=12, score=2.5, run_id=None,
        ... )
        >>> hit.archived, hit.message.text
        (True, 'The gate code is 4417.')
    """

    message: Message
    archived: bool
    position: int
    id: int | None
    score: float
    run_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The hit as a JSON-ready dict: id, position, archived, role, run_id, score, text.

        `text` is `search_text(message)`: what the search looked at.

        Examples:
            >>> from pygents_ctx import Message
            >>> hit = HistoryHit(
            ...     message=Message("user", "hi"), archived=False, position=0, id=None, score=1.0
            ... )
            >>> hit.to_dict()["text"]
            'hi'
        """
        return {
            "id": self.id,
            "position": self.position,
            "archived": self.archived,
            "role": self.message.role,
            "run_id": self.run_id,
            "score": round(self.score, 4),
            "text": search_text(self.message),
        }


def check_search(query: object, limit: object) -> tuple[str, int]:
    """The query and limit of a `search`, checked.

    Raises:
        TypeError: `query` is not a str, or `limit` is not an int.
        ValueError: `query` is empty, only whitespace or longer than
            `MAX_SEARCH_QUERY` characters, or `limit` is not between 1 and
            `MAX_SEARCH_LIMIT`.
    """
    if not isinstance(query, str):
        raise TypeError(f"search query must be a str, not {type(query).__name__}")
    if not query.strip():
        raise ValueError(
            f"search query {query!r} is empty; pass the words to look for, e.g. 'gate code'"
        )
    if len(query) > MAX_SEARCH_QUERY:
        raise ValueError(
            f"search query is {len(query):,} characters, more than the {MAX_SEARCH_QUERY:,} "
            "a search takes (MAX_SEARCH_QUERY); pass its key words only"
        )
    limit = whole_number(
        limit, "search limit", least=1, most=MAX_SEARCH_LIMIT, fix="ask for fewer hits"
    )
    return query, limit


def check_messages_after(after: object, limit: object) -> tuple[int, int]:
    """The arguments of `messages_after`, checked.

    Raises:
        TypeError: `after` or `limit` is not an int.
        ValueError: `limit` is less than 1, or either is past what a database holds
            (64-bit integers).
    """
    name = "the message id messages_after starts after"
    after = whole_number(after, name, least=SMALLEST, most=LARGEST)
    return after, whole_number(limit, "messages_after limit", least=1, most=LARGEST)


def check_message_ids(ids: object) -> list[int]:
    """The ids `messages_with_ids` looks up: distinct, in the order given.

    Raises:
        TypeError: `ids` is a str or not iterable, or holds something not an int.
        ValueError: An id is past what a database holds (64-bit integers).
    """
    if isinstance(ids, str | bytes) or not isinstance(ids, Iterable):
        raise TypeError(f"messages_with_ids takes an iterable of message ids, not {ids!r}")
    checked = [whole_number(item, "a message id", least=SMALLEST, most=LARGEST) for item in ids]
    return list(dict.fromkeys(checked))


def search_text(message: Message) -> str:
    """The text of `message` a search looks at, its parts joined by newlines.

    Text blocks, tool results' text, and tool calls' names and the string
    values of their input (however nested).

    Examples:
        >>> from pygents_ctx import Message, ToolUseBlock
        >>> search_text(Message("assistant", [ToolUseBlock("c1", "lookup", {"city": "Oslo"})]))
        'lookup\\nOslo'
    """
    return "\n".join(_parts(message))


def indexed_text(message: Message) -> str:
    """The text of `message` a search looks in: `search_text`, then the words kept
    of its offloaded tool results' whole texts (`OffloadedResult.words`)."""
    kept = [
        block.offloaded.words
        for block in message.content
        if type(block) is ToolResultBlock and block.offloaded is not None and block.offloaded.words
    ]
    return "\n".join([search_text(message), *kept]) if kept else search_text(message)


def offloaded_words(text: str) -> str:
    """The distinct words of `text` in first-seen order, space-separated, the first
    `INDEXED_CHARACTERS` characters of them: what an offloaded result's stub keeps.

    Examples:
        >>> offloaded_words("ERROR disk full; error: DISK at 91%")
        'error disk full at 91'
    """
    return bounded(" ".join(dict.fromkeys(words(text))))


def bounded(joined: str) -> str:
    """Words joined by spaces, cut at a space to at most `INDEXED_CHARACTERS` characters."""
    if len(joined) <= INDEXED_CHARACTERS:
        return joined
    return joined[: joined.rfind(" ", 0, INDEXED_CHARACTERS + 1)].rstrip()


def offloaded_matches(message: Message, query: str) -> list[str]:
    """The handles of `message`'s offloaded tool results whose whole text holds a word of
    `query` (looked up as a search does) that the message's shown text does not."""
    terms = set(query_words(query)) - set(words(search_text(message)))
    return [
        block.offloaded.handle
        for block in message.content
        if type(block) is ToolResultBlock
        and block.offloaded is not None
        and not terms.isdisjoint(block.offloaded.words.split())
    ]


def _parts(message: Message) -> Iterator[str]:
    for block in message.content:
        if type(block) is TextBlock:
            yield block.text
        elif type(block) is ToolResultBlock:
            if isinstance(block.content, str):
                yield block.content
            else:
                yield from (part.text for part in block.content if type(part) is TextBlock)
        elif type(block) is ToolUseBlock:
            yield block.name
            yield from _strings(block.input)


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def words(text: str) -> list[str]:
    """The words of `text`, as every store splits it: letters and digits, lowercased, no accents.

    Examples:
        >>> words("Café-au-lait, 2 shots (O'Neil's order)!")
        ['cafe', 'au', 'lait', '2', 'shots', 'o', 'neil', 's', 'order']
    """
    found = _WORD.findall(text.lower())
    if text.isascii():
        return found
    return [_unaccented(word) for word in found]


def _unaccented(word: str) -> str:
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFD", word)
    return unicodedata.normalize(
        "NFC", "".join(char for char in decomposed if not unicodedata.combining(char))
    )


def query_words(query: str) -> list[str]:
    """The distinct words of a checked query that the stores look up, in order.

    `STOP_WORDS` are left out, unless the query has no other words.
    """
    found = list(dict.fromkeys(words(query)))
    telling = [word for word in found if word not in STOP_WORDS]
    return telling or found


@dataclass(frozen=True, slots=True)
class Candidate:
    """A message a scan may return, with where it is (the memory store's and the default's)."""

    message: Message
    archived: bool
    position: int
    id: int | None
    run_id: str | None
    counts: Counter[str]


def candidate(
    message: Message,
    *,
    archived: bool,
    position: int,
    id: int | None,
    run_id: str | None,
    counts: Counter[str] | None = None,
) -> Candidate:
    """A `Candidate`, its words counted unless `counts` (cached) is given."""
    if counts is None:
        counts = Counter(words(indexed_text(message)))
    return Candidate(message, archived, position, id, run_id, counts)


def rank(candidates: Iterable[Candidate], query: str, limit: int) -> list[HistoryHit]:
    """The best `limit` candidates for `query`: those with every word first, then by BM25.

    Ties go to the newest: the larger id, or without ids the later candidate
    (`candidates` come oldest first: the archive, then the live history). The
    document frequencies are those of `candidates`.
    """
    terms = query_words(query)
    pool = list(candidates)
    if not terms or not pool:
        return []
    average = sum(c.counts.total() for c in pool) / len(pool) or 1.0
    frequency = {term: sum(1 for c in pool if term in c.counts) for term in terms}
    weight = {term: _idf(len(pool), found) for term, found in frequency.items() if found}
    scored: list[tuple[bool, float, int, Candidate]] = []
    for order, entry in enumerate(pool):
        length = entry.counts.total()
        score, matched = 0.0, 0
        for term, idf in weight.items():
            count = entry.counts.get(term, 0)
            if count:
                matched += 1
                score += idf * count * (_K1 + 1) / (count + _K1 * (1 - _B + _B * length / average))
        if matched:
            newness = order if entry.id is None else entry.id
            scored.append((matched < len(terms), score, newness, entry))
    scored.sort(key=lambda item: (item[0], -item[1], -item[2]))
    return [
        HistoryHit(
            message=entry.message,
            archived=entry.archived,
            position=entry.position,
            id=entry.id,
            score=score,
            run_id=entry.run_id,
        )
        for _, score, _, entry in scored[:limit]
    ]


def _idf(total: int, found: int) -> float:
    # FTS5's: a word in more than half the messages weighs almost nothing, never less.
    return max(math.log((total - found + 0.5) / (found + 0.5)), 1e-6)
