"""Long agent conversations for `python -m bench context`, the same for the same seed.

A conversation is a system prompt, then `steps` model calls. Before each call
come its inputs: the user's message, or the results of the tool calls the
model made in its previous reply; the reply is scripted (text, or text and one
or two tool calls). Tool results are small (a few lines) or, one in eight,
large (a log or a JSON listing of 2,000 to 11,000 tokens). `facts` sentences
("the access code of the Vokaresh project is 4817-QZ") are planted at random
steps, in what the step brings: the user's message (about 40%) or a tool
result (60%); the last step's user message opens the questions about them
(`Fact.question`).

Each step has a time (`at`, seconds from the start): a tool answers in 2 to
20 seconds, the user in 10 seconds to 2 minutes, and one user message in 30
comes after a break of 6 to 30 minutes (longer than a prompt cache lives).

A conversation is saved as a fixture (`to_fixture`, `from_fixture`): the
inputs and replies as JSON, replayed by a `ScriptedModel` as they were.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from pygents_ctx import Message, TextBlock, ToolResultBlock, ToolUseBlock
from pygents_ctx.context.messages import from_dict, to_dict

__all__ = ["FIXTURE_FORMAT", "Conversation", "Fact", "Step", "from_fixture", "generate"]

FIXTURE_FORMAT: Final = "pygents-ctx bench context conversation 1"
SYSTEM: Final = (
    "You are an operations assistant for a software company. You read files, run "
    "commands and search the code with your tools, and you keep track of what the "
    "user tells you: they will ask about it later."
)
TASK: Final = "We are migrating our services this week. Help me keep everything on track."
CLOSING: Final = "Before we wrap up, some questions about details from earlier."

ATTRIBUTES: Final = (
    "access code",
    "launch date",
    "budget",
    "owner",
    "server region",
    "backup window",
    "license key",
    "on-call phone number",
    "build number",
    "database port",
)
WORDS: Final = [
    "deploy",
    "service",
    "queue",
    "worker",
    "latency",
    "config",
    "cache",
    "index",
    "migration",
    "rollout",
    "cluster",
    "metrics",
    "alert",
    "retry",
    "timeout",
    "schema",
    "backup",
    "replica",
    "token",
    "gateway",
    "release",
    "branch",
    "review",
    "pipeline",
    "storage",
    "bucket",
    "volume",
    "network",
    "proxy",
    "route",
    "shard",
    "partition",
    "ledger",
    "invoice",
    "report",
    "dashboard",
    "export",
    "import",
    "tenant",
    "quota",
    "scheduler",
    "cron",
    "batch",
    "stream",
    "consumer",
    "producer",
    "topic",
    "event",
    "webhook",
    "audit",
]
SYLLABLES: Final = [
    "ka",
    "re",
    "vo",
    "mi",
    "tu",
    "sel",
    "dra",
    "pon",
    "qua",
    "zen",
    "bri",
    "lo",
    "fa",
    "nir",
    "gho",
    "ute",
    "xan",
    "yil",
]
TOOLS: Final = ("read_file", "run_command", "search_code")


@dataclass(frozen=True, slots=True)
class Fact:
    """A planted fact: the sentence, the step whose input holds it, and its question."""

    sentence: str
    step: int
    question: str
    answer: str


@dataclass(frozen=True, slots=True)
class Step:
    """One model call: when it happens, the messages before it, and the scripted reply."""

    at: float
    inputs: tuple[Message, ...]
    reply: Message


@dataclass(frozen=True, slots=True)
class Conversation:
    """A whole conversation: the system prompt, the steps, the planted facts."""

    seed: int
    system: Message
    steps: tuple[Step, ...]
    facts: tuple[Fact, ...]

    def to_fixture(self) -> dict[str, Any]:
        """The conversation as JSON data (see `from_fixture`)."""
        return {
            "format": FIXTURE_FORMAT,
            "seed": self.seed,
            "system": to_dict(self.system),
            "steps": [
                {
                    "at": s.at,
                    "inputs": [to_dict(m) for m in s.inputs],
                    "reply": to_dict(s.reply),
                }
                for s in self.steps
            ],
            "facts": [
                {"sentence": f.sentence, "step": f.step, "question": f.question, "answer": f.answer}
                for f in self.facts
            ],
        }


def from_fixture(data: Mapping[str, Any]) -> Conversation:
    """A conversation from `Conversation.to_fixture()` data.

    Raises:
        ValueError: The data is not such a fixture (its `format` says what it is).
    """
    if data.get("format") != FIXTURE_FORMAT:
        raise ValueError(
            f"not a context benchmark fixture: format is {data.get('format')!r}, expected "
            f"{FIXTURE_FORMAT!r}; record one with `python -m bench context --record FILE`"
        )
    steps = tuple(
        Step(float(s["at"]), tuple(from_dict(m) for m in s["inputs"]), from_dict(s["reply"]))
        for s in data["steps"]
    )
    facts = tuple(Fact(f["sentence"], f["step"], f["question"], f["answer"]) for f in data["facts"])
    return Conversation(int(data["seed"]), from_dict(data["system"]), steps, facts)


class _Writer:
    """The text of the conversation, drawn from one `random.Random`."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.names: set[str] = set()

    def words(self, low: int, high: int) -> str:
        return " ".join(self.rng.choices(WORDS, k=self.rng.randint(low, high)))

    def sentence(self) -> str:
        return self.words(8, 18).capitalize() + "."

    def name(self) -> str:
        while True:
            name = "".join(self.rng.choices(SYLLABLES, k=3)).capitalize()
            if name not in self.names:
                self.names.add(name)
                return name

    def fact(self, step: int) -> Fact:
        attribute = self.rng.choice(ATTRIBUTES)
        name = self.name()
        letters = "".join(self.rng.choices("ABCDEFGHJKLMNPQRSTUVWXYZ", k=2))
        value = f"{self.rng.randint(1000, 9999)}-{letters}"
        sentence = f"For the record, the {attribute} of the {name} project is {value}."
        return Fact(sentence, step, f"What is the {attribute} of the {name} project?", value)

    def user(self, step: int, fact: Fact | None) -> Message:
        text = " ".join(self.sentence() for _ in range(self.rng.randint(1, 3)))
        if fact is not None:
            text = f"{text} {fact.sentence}"
        return Message("user", text)

    def result(self, call: ToolUseBlock, fact: Fact | None) -> ToolResultBlock:
        rng = self.rng
        if rng.random() < 0.125:  # large: a log or a JSON listing
            lines = rng.randint(120, 400)
            if rng.random() < 0.5:
                body = [
                    f"2026-03-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:"
                    f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z "
                    f"{rng.choice(('INFO', 'WARN', 'DEBUG'))} {self.words(4, 9)}"
                    for _ in range(lines)
                ]
            else:
                body = [
                    f'{{"id": {rng.randint(1, 99999)}, "name": "{rng.choice(WORDS)}", '
                    f'"size": {rng.randint(1, 10**6)}, "state": "{rng.choice(WORDS)}"}},'
                    for _ in range(lines)
                ]
        else:
            body = [self.words(5, 12) for _ in range(rng.randint(2, 8))]
        if fact is not None:
            body.insert(rng.randint(0, len(body)), fact.sentence)
        return ToolResultBlock(call.id, "\n".join(body))

    def reply(self, step: int) -> Message:
        rng = self.rng
        text = TextBlock(" ".join(self.sentence() for _ in range(rng.randint(1, 3))))
        if rng.random() < 0.4:
            return Message("assistant", [text])
        calls = [
            ToolUseBlock(
                f"call_{step:05d}_{n}", tool, {"query": self.words(2, 5), "path": rng.choice(WORDS)}
            )
            for n, tool in enumerate(rng.sample(TOOLS, 2 if rng.random() < 0.15 else 1))
        ]
        return Message("assistant", [text, *calls])


def generate(seed: int, steps: int, facts: int) -> Conversation:
    """The conversation for `seed`: `steps` model calls, `facts` planted facts.

    Raises:
        ValueError: `steps` is below 2, or `facts` is negative or not below `steps`.
    """
    if steps < 2:
        raise ValueError(f"--steps must be at least 2, not {steps}")
    if not 0 <= facts < steps:
        raise ValueError(f"--facts must be between 0 and --steps - 1 ({steps - 1}), not {facts}")
    rng = random.Random(seed)
    writer = _Writer(rng)
    planted = sorted(rng.sample(range(1, steps - 1), min(facts, steps - 2)))
    facts_at = {step: writer.fact(step) for step in planted}
    at, made, previous = 0.0, [], Message("user", TASK)
    for step in range(steps):
        fact = facts_at.get(step)
        if step == 0:
            inputs: tuple[Message, ...] = (previous,)
        elif previous.tool_uses:
            # The fact goes into one of the results, when this step holds one.
            chosen = rng.randrange(len(previous.tool_uses))
            blocks: list[ToolResultBlock | TextBlock] = [
                writer.result(call, fact if n == chosen else None)
                for n, call in enumerate(previous.tool_uses)
            ]
            if step == steps - 1:
                blocks.append(TextBlock(CLOSING))
            inputs = (Message("user", blocks),)
            at += rng.uniform(2, 20)
        elif step == steps - 1:
            inputs = (Message("user", CLOSING),)
            at += rng.uniform(10, 120)
        else:
            inputs = (writer.user(step, fact),)
            at += rng.uniform(360, 1800) if rng.random() < 1 / 30 else rng.uniform(10, 120)
        previous = writer.reply(step)
        made.append(Step(round(at, 3), inputs, previous))
    return Conversation(
        seed, Message("system", SYSTEM), tuple(made), tuple(facts_at[s] for s in planted)
    )
