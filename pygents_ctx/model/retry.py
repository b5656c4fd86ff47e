"""When a failed model call is tried again: `RetryPolicy`, and reading what a provider asked.

Only transient failures are retried: rate limits (429), server errors (5xx),
request timeouts (408), lock conflicts (409), timeouts and lost connections.
The adapters turn the SDKs' errors into `ModelAPIError` with `transient` and
`retry_after` set, and switch the SDKs' own retries off, so this policy is the
only one.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Final

from pygents_ctx._checks import fraction, number, whole_number
from pygents_ctx.errors import ModelAPIError

__all__ = ["RetryPolicy"]

_TRANSIENT_STATUSES: Final = frozenset({408, 409, 429})


def is_transient_status(status: int, headers: Mapping[str, str] | None = None) -> bool:
    """Whether an HTTP error status is worth trying again (`x-should-retry` decides if present)."""
    hint = (headers or {}).get("x-should-retry")
    if hint in ("true", "false"):
        return hint == "true"
    return status in _TRANSIENT_STATUSES or status >= 500


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """The wait a response asked for: `retry-after-ms`, or `retry-after` in seconds or as a date.

    None when it asked for none (or the header cannot be read).
    """
    if not headers:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            if name == "retry-after-ms":
                continue
            try:
                when = parsedate_to_datetime(value)
            except (TypeError, ValueError):
                return None
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            seconds = (when - datetime.now(UTC)).total_seconds()
        if math.isfinite(seconds):
            return max(0.0, seconds)
    return None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a `ModelLoop` retries a model call that failed transiently.

    The `n`-th retry waits `initial_delay * multiplier ** (n - 1)` seconds,
    capped at `max_delay`, less a random part of up to `jitter` of it (so
    clients that failed together do not retry together). When the provider
    said how long to wait (`retry-after`), that wait is used instead; if it is
    longer than `max_delay`, the call is not retried and the error is raised.

    Args:
        max_attempts: Calls in all, the first included (1: never retry).
        initial_delay: Seconds before the first retry.
        max_delay: The longest wait, the provider's included.
        multiplier: How much each wait grows.
        jitter: The fraction of each wait that is random, from 0 to 1.

    Raises:
        TypeError: A setting is not a number (`max_attempts` must be an int).
        ValueError: A number is out of range.

    Examples:
        >>> policy = RetryPolicy(initial_delay=1.0, jitter=0.0)
        >>> [policy.delay(n, ModelAPIError("busy", transient=True)) for n in (1, 2, 3)]
        [1.0, 2.0, None]
    """

    max_attempts: int = 3
    initial_delay: float = 0.5
    max_delay: float = 60.0
    multiplier: float = 2.0
    jitter: float = 0.25

    def __post_init__(self) -> None:
        whole_number(self.max_attempts, "RetryPolicy.max_attempts", least=1)
        for name, low in (("initial_delay", 0.0), ("max_delay", 0.0), ("multiplier", 1.0)):
            number(getattr(self, name), f"RetryPolicy.{name}", least=low)
        fraction(self.jitter, "RetryPolicy.jitter", zero=True)

    def delay(self, failures: int, error: BaseException) -> float | None:
        """Seconds to wait before the next attempt after `failures` failed ones; None: give up.

        Only a transient `ModelAPIError` is retried.
        """
        if not isinstance(error, ModelAPIError) or not error.transient:
            return None
        if failures >= self.max_attempts:
            return None
        if error.retry_after is not None:
            return error.retry_after if error.retry_after <= self.max_delay else None
        base = min(self.max_delay, self.initial_delay * self.multiplier ** (failures - 1))
        return base - random.uniform(0.0, base * self.jitter)
