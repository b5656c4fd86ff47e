"""`SessionLease`: one writer per session, across tasks, processes and machines.

`store.lease()` makes one; `async with` takes it, keeps it renewed in the
background, and gives it back at the end (also when the block is cancelled or
fails). The lease lives in the store, so every process sharing the database
sees it: a second taker gets `SessionBusyError` (or waits, if asked to), and
the lease of a holder that crashed runs out after `ttl` seconds, when anyone
may take it.

While a lease is held, the writes made under it (by the task that took it,
and the tasks that task starts) are fenced: the store checks the lease's
token inside each write's own transaction and refuses the write, raising
`LeaseLostError`, once the lease has passed to another holder or run out. A
`Fence` in a context variable is how a write knows it runs under a lease,
without the token being handed down through every call.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Hashable
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, NamedTuple, Protocol, Self, TypeVar

from pygents_ctx._checks import number, storable_text
from pygents_ctx.context.stores._lease_sql import LeaseState, Refused, refusal
from pygents_ctx.errors import LeaseLostError, SessionBusyError

if TYPE_CHECKING:
    from types import TracebackType

__all__ = [
    "Fence",
    "InProcessLeases",
    "LeaseBackend",
    "SessionLease",
    "check_lease_options",
    "current_fence",
    "fenced",
]

T = TypeVar("T")

# Renewals come at this fraction of the ttl: two can fail before the lease runs out.
RENEW_FRACTION: Final = 1 / 3
# Releases of leases granted to a caller that was cancelled meanwhile, kept until done.
_ORPHANS: set[asyncio.Future[None]] = set()
_FIRST_POLL: Final = 0.02
_LONGEST_POLL: Final = 0.5


class LeaseBackend(Protocol):
    """What a store gives `SessionLease`: its session, its lease's scope, three atomic steps.

    `_lease_scope` names where the lease lives (the database and the
    session): two stores with equal scopes share one lease, so a write
    through either is fenced by a lease taken through the other.
    """

    @property
    def session_id(self) -> str:
        """The session the lease is on."""
        ...

    @property
    def _lease_scope(self) -> Hashable: ...

    async def _acquire_lease(
        self, owner: str, ttl: float, create: bool
    ) -> tuple[bool, LeaseState]: ...

    async def _renew_lease(self, owner: str, token: int, ttl: float) -> LeaseState | None: ...

    async def _release_lease(self, owner: str, token: int) -> None: ...


def _seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    return float(value)


def check_lease_options(
    ttl: object, wait: object, *, names: tuple[str, str] = ("lease ttl", "lease wait")
) -> tuple[float, float]:
    """`(ttl, wait)` as seconds, after checking them; `names` name them in the errors.

    Raises:
        TypeError: `ttl` is not a number, or `wait` is neither False nor a number.
        ValueError: `ttl` is not positive and finite, or `wait` is negative, NaN or True.
    """
    ttl_name, wait_name = names
    seconds = number(ttl, ttl_name, above=True, fix="a number of seconds")
    if wait is True:
        raise ValueError(
            f"{wait_name}=True does not say for how long; pass seconds (math.inf waits forever)"
        )
    patience = 0.0 if wait is False else _seconds(wait_name, wait)
    if not patience >= 0:
        raise ValueError(
            f"{wait_name} must be False or a number of seconds >= 0 (math.inf: forever), "
            f"not {wait!r}"
        )
    return seconds, patience


def _check_owner(owner: object) -> str:
    if owner is None:
        return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    return storable_text(owner, "lease owner", fix="pass None for one named after this process")


def _utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


class Fence(NamedTuple):
    """A lease held by the running code, as the store checks its writes against it.

    Attributes:
        scope: The store's `_lease_scope` (database and session).
        owner: The lease's owner.
        token: The fencing token the write must still hold in the store.
        lease: The `SessionLease`, told when the store refuses a write.
    """

    scope: Hashable
    owner: str
    token: int
    lease: SessionLease

    @property
    def active(self) -> bool:
        """Whether the lease is still this take of it (held, or lost and not yet released)."""
        return self.lease._token == self.token

    def refuse(self, why: str) -> LeaseLostError:
        """The error of a write the store refused; the lease is lost from now on."""
        self.lease._lose(why)
        return self.lease._lost_error()


# The leases held by the code running in this context (a task, and the tasks it starts).
_FENCES: ContextVar[tuple[Fence, ...]] = ContextVar("pygents_ctx_fences", default=())


def current_fence(store: LeaseBackend) -> Fence | None:
    """The lease the running code holds on `store`'s session, or None: writes go unfenced."""
    fences = _FENCES.get()
    if not fences:
        return None
    scope = store._lease_scope
    for fence in fences:
        if fence.scope == scope and fence.active:
            return fence
    return None


async def fenced(fence: Fence, write: Awaitable[T]) -> T:
    """Await `write`, a write that checks `fence` in its own transaction.

    Raises:
        LeaseLostError: The store refused the write (`Refused`): nothing of it
            was stored, and the lease is lost.
    """
    try:
        return await write
    except Refused as refused:
        raise fence.refuse(refused.why) from None


class SessionLease:
    """The right to write to one session, for a while: take it with `async with`.

    Made by `store.lease(...)`. Entering takes the lease (or raises
    `SessionBusyError`, after waiting up to `wait` seconds), then renews it in
    the background every third of `ttl` while the block runs. Leaving gives
    it back, whether the block ended, failed or was cancelled.

    If a renewal finds the lease gone (the process stalled, or the database
    was unreachable, for longer than `ttl`, and another holder took it over,
    or the session was deleted), `lost` becomes True and the block is
    cancelled at its next `await`; the `async with` then raises
    `LeaseLostError`. Holding it with `acquire()` / `release()` instead, call
    `await lease.check()` before each write: nothing is cancelled for you.

    Writes are fenced: while the lease is held, every write to its session
    made by the code that took it (this task, and the tasks it starts: a
    `ModelLoop`'s steps, tools and hooks) is checked by the store against the
    lease's token in the write's own transaction, and refused with
    `LeaseLostError` (nothing of it stored, `lost` now True) once another
    holder took the lease over or it ran out. Writes from code that holds no
    lease are not checked: everyone writing to the session must take it (a
    `ModelLoop` does).

    Attributes:
        session_id: The session.
        owner: Names the holder in `SessionBusyError`s other takers get
            (default: host, process id and a random suffix). A label, not a
            key: two leases with the same owner still exclude each other.
        ttl: Seconds the lease lasts past each renewal.
        wait: Seconds entering waits for a busy lease (0: not at all).

    Examples:
        >>> import asyncio
        >>> from pygents_ctx import SessionBusyError
        >>> from pygents_ctx.context.stores import MemoryContextStore
        >>> async def main():
        ...     store = MemoryContextStore(session_id="chat")
        ...     async with store.lease(ttl=5, owner="worker-1") as lease:
        ...         try:
        ...             await store.lease().acquire()
        ...         except SessionBusyError as busy:
        ...             return lease.held, busy.holder
        >>> asyncio.run(main())
        (True, 'worker-1')
    """

    __slots__ = (
        "_cancelled",
        "_create",
        "_deadline",
        "_expires_at",
        "_keeper",
        "_lost",
        "_renews",
        "_store",
        "_task",
        "_token",
        "owner",
        "ttl",
        "wait",
    )

    def __init__(
        self,
        store: LeaseBackend,
        *,
        ttl: float = 30.0,
        wait: float | bool = False,
        owner: str | None = None,
        create: bool = False,
        renew: bool = True,
    ) -> None:
        self.ttl, self.wait = check_lease_options(ttl, wait)
        self.owner = _check_owner(owner)
        for name, flag in (("create", create), ("renew", renew)):
            if not isinstance(flag, bool):
                raise TypeError(f"lease {name} must be a bool, not {type(flag).__name__}")
        self._store = store
        self._create = create
        self._renews = renew
        self._token: int | None = None
        self._expires_at: float | None = None
        self._deadline = 0.0  # time.monotonic() by which it surely ran out, if not renewed
        self._lost: str | None = None  # why, once lost
        self._keeper: asyncio.Task[None] | None = None
        self._task: asyncio.Task[object] | None = None  # the `async with` block's task
        self._cancelled = False

    def __repr__(self) -> str:
        state = "lost" if self._lost else "held" if self.held else "not held"
        return f"<SessionLease {self.session_id!r} owner={self.owner!r} {state}>"

    @property
    def session_id(self) -> str:
        """The session the lease is on."""
        return self._store.session_id

    @property
    def held(self) -> bool:
        """Whether this lease was taken, and is neither released nor known to be lost."""
        return self._token is not None and self._lost is None

    @property
    def lost(self) -> bool:
        """Whether the lease ran out or was taken over while held (see `check()`)."""
        return self._lost is not None

    @property
    def token(self) -> int | None:
        """The fencing token: it grows each time the session's lease changes hands.

        Give it to systems outside the store, so they can refuse a holder
        older than the newest they have seen. None while not taken.
        """
        return self._token

    @property
    def expires_at(self) -> datetime | None:
        """When the lease runs out unless renewed (UTC, by the store's clock); None if not taken."""
        return None if self._expires_at is None else _utc(self._expires_at)

    # -- taking and giving back --------------------------------------------------

    async def acquire(self) -> Self:
        """Take the lease, waiting up to `wait` seconds for another holder to let go.

        Raises:
            SessionBusyError: Another holder has it (still, after `wait`).
            SessionNotFoundError: The store never created the session and
                `create` is false.
            RuntimeError: This lease is already held.
        """
        if self._token is not None and self._lost is None:
            raise RuntimeError(f"{self!r} is already held; release() it first")
        began = time.monotonic()
        pause = _FIRST_POLL
        while True:
            asked = time.monotonic()
            taken, state = await self._ask_store()
            if taken:
                break
            waited = time.monotonic() - began if self.wait else 0.0
            left = self.wait - waited
            if left <= 0:
                raise self._busy(state, waited)
            # Poll, sooner as the holder's expiry nears; the jitter spreads the takers.
            nap = min(pause, left, state.remaining + 0.005) * random.uniform(0.8, 1.2)
            await asyncio.sleep(nap)
            pause = min(pause * 2, _LONGEST_POLL)
        self._token, self._lost, self._cancelled = state.token, None, False
        self._note(state, asked)
        scope = self._store._lease_scope
        fence = Fence(scope, self.owner, state.token, self)
        kept = (held for held in _FENCES.get() if held.active and held.scope != scope)
        _FENCES.set((*kept, fence))
        if self._renews:
            self._keeper = asyncio.create_task(self._keep(), name=f"renew {self!r}")
        return self

    async def _ask_store(self) -> tuple[bool, LeaseState]:
        request = asyncio.ensure_future(
            self._store._acquire_lease(self.owner, self.ttl, self._create)
        )
        try:
            return await asyncio.shield(request)
        except asyncio.CancelledError:
            # Cancelled while the store was granting it: give back what nobody will hold.
            request.add_done_callback(self._give_back)
            raise

    def _give_back(self, request: asyncio.Future[tuple[bool, LeaseState]]) -> None:
        if request.cancelled() or request.exception() is not None:
            return
        taken, state = request.result()
        if taken:
            release = self._store._release_lease(self.owner, state.token)
            _ORPHANS.add(task := asyncio.ensure_future(release))
            task.add_done_callback(_ORPHANS.discard)

    def _busy(self, state: LeaseState, waited: float) -> SessionBusyError:
        after = f" (after waiting {waited:.1f} s)" if self.wait else ""
        until = _utc(state.expires_at).isoformat(timespec="seconds")
        return SessionBusyError(
            f"session {self.session_id!r} is leased by {state.owner!r} until {until} "
            f"({state.remaining:.1f} s from now unless renewed){after}: one writer per "
            "session at a time. Wait for it with lease(wait=seconds) "
            "(ModelLoop(lease=LeasePolicy(wait=seconds))), or try again later",
            session_id=self.session_id,
            holder=state.owner,
            expires_at=_utc(state.expires_at),
            waited=waited,
        )

    def _note(self, state: LeaseState, asked: float) -> None:
        self._expires_at = state.expires_at
        # Counted from before the request: whatever the store's clock, it ran out by then.
        self._deadline = asked + state.remaining

    async def renew(self) -> None:
        """Extend the lease by `ttl` from now (the background renewal does this for you).

        Raises:
            LeaseLostError: Another holder took the lease over, or the session
                was deleted; `lost` is now True.
            RuntimeError: The lease is not held.
        """
        if self._token is None:
            raise RuntimeError(f"{self!r} is not held; acquire() it first")
        self._raise_if_lost()
        asked = time.monotonic()
        state = await self._store._renew_lease(self.owner, self._token, self.ttl)
        if state is None:
            self._lose("another holder took it over after it ran out, or the session was deleted")
            self._raise_if_lost()
        else:
            self._note(state, asked)

    async def check(self) -> None:
        """Raise `LeaseLostError` if the lease was lost; call it before writing.

        Free while the lease is known to be current; past its expiry with no
        renewal (the process stalled), it asks the store, and renews the
        lease if nobody took it meanwhile.

        Raises:
            LeaseLostError: The lease was lost.
            RuntimeError: The lease is not held.
        """
        if self._token is None:
            raise RuntimeError(f"{self!r} is not held; acquire() it first")
        self._raise_if_lost()
        if time.monotonic() >= self._deadline:
            await self.renew()

    async def release(self) -> None:
        """Give the lease back now, so the next taker need not wait. Idempotent.

        A lost lease is not given back (it is someone else's now).
        """
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
        token, self._token = self._token, None
        fences = _FENCES.get()
        if any(fence.lease is self for fence in fences):
            _FENCES.set(tuple(fence for fence in fences if fence.lease is not self))
        if token is not None and self._lost is None:
            await self._store._release_lease(self.owner, token)

    # -- keeping it --------------------------------------------------------------

    async def _keep(self) -> None:
        interval = self.ttl * RENEW_FRACTION
        while self._lost is None:
            await asyncio.sleep(max(min(interval, self._deadline - time.monotonic()), 0))
            try:
                await self.renew()
            except LeaseLostError:
                return
            except Exception as exc:  # the database is unreachable: try again until it runs out
                if time.monotonic() >= self._deadline:
                    self._lose(f"it could not be renewed before it ran out ({exc!r})")
                    return
                interval = max(self.ttl * RENEW_FRACTION / 4, 0.005)
            else:
                interval = self.ttl * RENEW_FRACTION

    def _lose(self, why: str) -> None:
        if self._lost is not None:
            return
        self._lost = why
        task = self._task
        if task is not None and not task.done() and task is not asyncio.current_task():
            self._cancelled = True
            task.cancel(f"the lease on session {self.session_id!r} was lost")

    def _raise_if_lost(self) -> None:
        if self._lost is not None:
            raise self._lost_error()

    def _lost_error(self) -> LeaseLostError:
        return LeaseLostError(
            f"the lease of {self.owner!r} on session {self.session_id!r} was lost: "
            f"{self._lost}. Another holder may be writing to the session now; stop, "
            "and take the lease again before writing (a longer ttl rides out longer stalls)",
            session_id=self.session_id,
            owner=self.owner,
        )

    # -- async with ----------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.acquire()
        self._task = asyncio.current_task()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        task, self._task = self._task, None
        try:
            await self.release()  # stops the keeper first: it cancels nothing after this
        except asyncio.CancelledError as late:
            if not (self._cancelled and task is not None):
                raise
            exc = late  # the keeper's cancellation, delivered only now
        others = 1  # cancellations not ours still pending on the task
        if self._cancelled and task is not None:
            self._cancelled = False
            others = task.uncancel()
        if isinstance(exc, asyncio.CancelledError) and others:
            return  # cancelled from outside: that goes on
        if self._lost is not None and (exc is None or isinstance(exc, asyncio.CancelledError)):
            # Lost while held: what the block wrote may have crossed another holder's writes.
            try:
                self._raise_if_lost()
            except LeaseLostError as lost:
                raise lost from exc


class InProcessLeases:
    """The lease of a store that keeps it in memory: held in this process only.

    What `MemoryContextStore` (and a custom store that does not override the
    lease steps) uses: leases taken through the same store object exclude each
    other; other processes cannot see them.
    """

    __slots__ = ("_state", "_tokens")

    def __init__(self) -> None:
        self._state: LeaseState | None = None
        self._tokens = 0

    def acquire(self, owner: str, ttl: float) -> tuple[bool, LeaseState]:
        now = time.time()
        state = self._state
        if state is not None and state.expires_at > now:
            return False, state._replace(remaining=state.expires_at - now)
        self._tokens += 1
        self._state = LeaseState(owner, self._tokens, now + ttl, ttl)
        return True, self._state

    def refusal(self, token: int) -> str | None:
        """Why a write under lease `token` is refused, or None if it may go ahead."""
        state = self._state
        held = None if state is None else (state.owner, state.token, time.time() - state.expires_at)
        return refusal(token, held)

    def renew(self, owner: str, token: int, ttl: float) -> LeaseState | None:
        state = self._state
        if state is None or (state.owner, state.token) != (owner, token):
            return None
        self._state = LeaseState(owner, token, time.time() + ttl, ttl)
        return self._state

    def release(self, owner: str, token: int) -> None:
        state = self._state
        if state is not None and (state.owner, state.token) == (owner, token):
            self._state = state._replace(expires_at=min(state.expires_at, time.time()))
