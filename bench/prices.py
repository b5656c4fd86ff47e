"""The price table of `python -m bench context`, and what a conversation costs by it.

A table is JSON (bench/prices.json is the shipped one): its `date` (when the
prices were taken), `per_tokens` (the unit the prices are for, e.g. a million
tokens) and, for each provider (`openai`, `anthropic`), the `model` priced and
its `input`, `cached_input`, `cache_write` and `output` prices.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from bench.cache_sim import Served

__all__ = ["DEFAULT_PRICES", "PROVIDERS", "Price", "conversation_cost", "load_prices"]

DEFAULT_PRICES: Final = Path(__file__).parent / "prices.json"
PROVIDERS: Final = ("openai", "anthropic")


@dataclass(frozen=True, slots=True)
class Price:
    """One model's prices per `per_tokens` tokens."""

    model: str
    input: float
    cached_input: float
    cache_write: float
    output: float


def load_prices(path: Path) -> tuple[str, int, dict[str, Price]]:
    """The price table at `path`: its date, its unit (tokens) and a `Price` per provider.

    Raises:
        ValueError: The file is not JSON, or a field is missing or not a
            non-negative number; the message names the field.
    """
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"--prices {path}: cannot read a JSON price table: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"--prices {path}: the table must be a JSON object")
    date, per = data.get("date"), data.get("per_tokens")
    if not isinstance(date, str) or not date:
        raise ValueError(f"--prices {path}: `date` must say when the prices were taken")
    if not isinstance(per, int) or isinstance(per, bool) or per < 1:
        raise ValueError(f"--prices {path}: `per_tokens` must be a positive integer, e.g. 1000000")
    prices = {}
    for provider in PROVIDERS:
        entry = (data.get("providers") or {}).get(provider)
        if not isinstance(entry, dict):
            raise ValueError(f"--prices {path}: `providers.{provider}` is missing")
        if not isinstance(entry.get("model"), str) or not entry["model"]:
            raise ValueError(f"--prices {path}: `providers.{provider}.model` must name a model")
        amounts = {}
        for name in ("input", "cached_input", "cache_write", "output"):
            value = entry.get(name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(
                    f"--prices {path}: `providers.{provider}.{name}` must be a number >= 0, "
                    f"not {value!r}"
                )
            amounts[name] = float(value)
        prices[provider] = Price(entry["model"], **amounts)
    return date, per, prices


def conversation_cost(served: Served, output_tokens: int, price: Price, per: int) -> float:
    """What `served` (input tokens, the cached and written parts) and the output cost."""
    fresh = served.input_tokens - served.cached_tokens - served.cache_write_tokens
    return (
        fresh * price.input
        + served.cached_tokens * price.cached_input
        + served.cache_write_tokens * price.cache_write
        + output_tokens * price.output
    ) / per
