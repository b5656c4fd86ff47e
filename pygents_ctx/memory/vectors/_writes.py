"""Group commit: concurrent writes to a vector store are committed together, by one writer.

Every write (`add`, `upsert`, `add_many`) is checked, and its embeddings
computed, by its caller; then it joins the store's `WriteQueue` and waits.
When nothing is being written, the caller commits its write at once, as a
batch of one. Otherwise it waits: one writer task takes everything waiting
and hands it to the backend's commit as one batch (in SQLite and PostgreSQL
one transaction), and writes that arrive meanwhile wait for the next one.
The connection runs its calls in the order they were made, so the batches
commit in that order. So a single awaited write costs one transaction, as
before, and many concurrent writes (`asyncio.gather` of upserts, or many
tasks upserting) share a few.

A caller's await returns only after the batch holding its write committed.
If the batch fails (the database refuses the transaction, the disk is
full), nothing of it is written and every caller in it gets that error. A
write whose collection was dropped, or re-created with another dimension,
since it was checked gets its own error and is left out; the others in the
batch are written.

Within a batch the backend writes `runs`: consecutive writes to the same
collection, of the same kind, with no id in common, joined into one set of
columns (one statement), in the order they were made, so a later write of an
id replaces an earlier one as it would have one batch later.
"""

from __future__ import annotations

import asyncio
from array import array
from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple, TypeAlias

from pygents_ctx.memory.vectors._bulk import Columns

__all__ = ["Outcome", "Run", "Write", "WriteQueue", "runs"]


class Write(NamedTuple):
    """One caller's checked documents, for collection `name` of `dimension`."""

    name: str
    dimension: int
    columns: Columns
    replace: bool


# The ids a write stored, in order (without `replace`, those that were not stored
# before), or the error that kept it out of its batch.
Outcome: TypeAlias = "list[str] | Exception"


class Run(NamedTuple):
    """Consecutive writes of a batch that one statement can store: `columns` holds them all."""

    name: str
    dimension: int
    replace: bool
    columns: Columns
    writes: list[Write]

    def outcomes(self, written: set[str]) -> list[Outcome]:
        """Each write's ids that are in `written`, in order."""
        return [[i for i in w.columns.ids if i in written] for w in self.writes]


def runs(writes: Sequence[Write]) -> list[Run]:
    """`writes` in runs, in order: a run grows while the collection, dimension and kind stay
    the same and no id repeats (so one statement writes it as the writes one by one would)."""
    grouped: list[list[Write]] = []
    ids: set[str] = set()
    for write in writes:
        last = grouped[-1][-1] if grouped else None
        if (
            last is not None
            and (last.name, last.dimension, last.replace)
            == (write.name, write.dimension, write.replace)
            and ids.isdisjoint(write.columns.ids)
        ):
            grouped[-1].append(write)
        else:
            grouped.append([write])
            ids = set()
        ids.update(write.columns.ids)
    return [
        Run(g[0].name, g[0].dimension, g[0].replace, _joined([w.columns for w in g]), g)
        for g in grouped
    ]


def _joined(parts: list[Columns]) -> Columns:
    if len(parts) == 1:
        return parts[0]
    vectors: array[float] = array("f")
    norms: array[float] = array("d")
    for part in parts:
        vectors.frombytes(part.vector_bytes())
        norms.extend(part.norms)
    return Columns(
        [i for part in parts for i in part.ids],
        [t for part in parts for t in part.texts],
        [m for part in parts for m in part.metadata],
        vectors,
        norms,
        parts[0].dimension,
    )


Commit: TypeAlias = Callable[[list[Write]], Awaitable[list[Outcome]]]


class WriteQueue:
    """A store's writes waiting for its one writer, which commits them in batches.

    `commit(batch)` stores a batch (one transaction) and returns one outcome
    per write, in order; if it raises, nothing of the batch is stored.
    """

    __slots__ = ("_alone", "_commit", "_waiting", "_writer")

    def __init__(self, commit: Commit) -> None:
        self._commit = commit
        self._waiting: list[tuple[Write, asyncio.Future[list[str]]]] = []
        self._writer: asyncio.Task[None] | None = None
        self._alone = 0  # batches of one being committed by their callers

    async def write(self, write: Write) -> list[str]:
        """Store `write` in the next batch; its ids written, once that batch committed."""
        if self._writer is None and not self._alone:
            # Nothing is being written: a batch of one, committed by its caller at once.
            # Writes made meanwhile wait for the writer, committed after this one.
            self._alone += 1
            try:
                [outcome] = await self._commit([write])
            finally:
                self._alone -= 1
            if isinstance(outcome, Exception):
                raise outcome
            return outcome
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[str]] = loop.create_future()
        self._waiting.append((write, future))
        if self._writer is None:
            self._writer = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        try:
            while self._waiting:
                # A caller cancelled before its batch began is left out (nothing of it
                # is written); once begun, a write commits whole or not at all.
                batch = [(w, f) for w, f in self._waiting if not f.cancelled()]
                self._waiting = []
                if batch:
                    await self._settle(batch)
        finally:
            self._writer = None

    async def _settle(self, batch: list[tuple[Write, asyncio.Future[list[str]]]]) -> None:
        try:
            outcomes = await self._commit([write for write, _ in batch])
        except asyncio.CancelledError:
            for _, future in batch:
                future.cancel()
            raise
        except BaseException as exc:  # nothing of the batch was written
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            if future.done():  # its caller stopped waiting; the write is committed
                continue
            if isinstance(outcome, Exception):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
