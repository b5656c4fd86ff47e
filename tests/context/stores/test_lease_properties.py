"""Any interleaving of takes, renewals, releases, writes and passing time: never two live holders.

The lease steps of the in-process backend and of SQLite (its SQL run on a
database of its own) are driven through the same random sequence of
operations by three holders, on a clock the test moves. Each holder believes
it holds the lease until the expiry its last successful take or renewal gave
it. At every moment at most one holder believes so, tokens only grow, both
backends agree on every answer, and a renewal succeeds exactly when no one
took the lease over since. A write (the fence check of a store write) goes
through exactly when its holder is the one live holder, so the writes that
go through come in the order of their tokens.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx.context.stores import _lease_sql, lease
from pygents_ctx.context.stores._lease_sql import LeaseState
from pygents_ctx.context.stores._sqlite_schema import migrate

HOLDERS = ("a", "b", "c")
TTL = 10.0

operations = st.lists(
    st.tuples(
        st.sampled_from(["take", "renew", "release", "write", "wait"]),
        st.sampled_from(HOLDERS),
        # Around the expiry, where an off-by-a-little would show, and anywhere.
        st.sampled_from([TTL / 3, TTL - 0.01, TTL, TTL + 0.001]) | st.floats(0.0, 2 * TTL),
    ),
    max_size=40,
)


class Clock:
    """The time both backends read: only the test moves it."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def time(self) -> float:
        return self.now


class Steps(Protocol):
    def take(self, owner: str) -> tuple[bool, LeaseState]: ...
    def renew(self, owner: str, token: int) -> LeaseState | None: ...
    def release(self, owner: str, token: int) -> None: ...
    def write(self, token: int) -> bool: ...


class InProcess:
    def __init__(self) -> None:
        self.leases = lease.InProcessLeases()

    def take(self, owner: str) -> tuple[bool, LeaseState]:
        return self.leases.acquire(owner, TTL)

    def renew(self, owner: str, token: int) -> LeaseState | None:
        return self.leases.renew(owner, token, TTL)

    def release(self, owner: str, token: int) -> None:
        self.leases.release(owner, token)

    def write(self, token: int) -> bool:
        return self.leases.refusal(token) is None


class SQLite:
    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:", isolation_level=None)
        migrate(self.db)
        self.db.execute("INSERT INTO pygents_sessions (session_id, created_at) VALUES ('s', '')")

    def take(self, owner: str) -> tuple[bool, LeaseState]:
        return _lease_sql.acquire_sqlite("s", owner, TTL, False, self.db)

    def renew(self, owner: str, token: int) -> LeaseState | None:
        return _lease_sql.renew_sqlite("s", owner, token, TTL, self.db)

    def release(self, owner: str, token: int) -> None:
        _lease_sql.release_sqlite("s", owner, token, self.db)

    def write(self, token: int) -> bool:
        try:
            _lease_sql.check_sqlite("s", token, self.db)
        except _lease_sql.Refused:
            return False
        return True


@dataclass
class Belief:
    token: int
    until: float


@contextmanager
def clocked(clock: Clock) -> Iterator[None]:
    with mock.patch.object(lease, "time", clock), mock.patch.object(_lease_sql, "time", clock):
        yield


@settings(max_examples=150, deadline=None)
@given(operations)
def test_at_most_one_holder_at_any_moment(steps: list[tuple[str, str, float]]) -> None:
    clock = Clock()
    sqlite = SQLite()
    backends: list[Steps] = [InProcess(), sqlite]
    beliefs: dict[str, Belief] = {}
    newest = 0  # the newest token granted
    granted: dict[str, int] = {}  # each holder's last token, held still or not
    written: list[int] = []  # the tokens of the writes that went through
    with clocked(clock), contextlib.closing(sqlite.db):
        for op, holder, amount in steps:
            answers = []
            for backend in backends:
                if op == "take":
                    answers.append(backend.take(holder))
                elif op == "renew" and holder in beliefs:
                    answers.append(backend.renew(holder, beliefs[holder].token))
                elif op == "release" and holder in beliefs:
                    answers.append(backend.release(holder, beliefs[holder].token))
                elif op == "write" and holder in granted:
                    answers.append(backend.write(granted[holder]))
            assert all(answer == answers[0] for answer in answers), (op, answers)
            answer = answers[0] if answers else None
            if op == "wait":
                clock.now += amount
            elif op == "take":
                assert isinstance(answer, tuple)
                taken, state = answer
                live = [h for h, b in beliefs.items() if b.until > clock.now]
                assert taken == (not live), (live, state)
                if taken:
                    assert state.token > newest
                    newest = state.token
                    beliefs[holder] = Belief(state.token, state.expires_at)
                    granted[holder] = state.token
                else:
                    assert state.owner in live
            elif op == "renew" and holder in beliefs:
                # Renewed exactly when nobody took it over since: its token is the newest.
                assert (answer is not None) == (beliefs[holder].token == newest)
                if answer is None:
                    del beliefs[holder]
                else:
                    assert isinstance(answer, LeaseState)
                    beliefs[holder] = Belief(answer.token, answer.expires_at)
            elif op == "release" and holder in beliefs:
                del beliefs[holder]
            elif op == "write" and holder in granted:
                live = [h for h, b in beliefs.items() if b.until > clock.now]
                assert answer == (live == [holder] and granted[holder] == newest), (live, answer)
                if answer:
                    written.append(granted[holder])
                assert written == sorted(written)
            live = [h for h, b in beliefs.items() if b.until > clock.now]
            assert len(live) <= 1, beliefs
