"""A deterministic corpus of what an agent's context holds, by kind of content.

`corpus(seed, per_kind)` makes `per_kind` texts of each kind, from a seed:

- `chat`: what users and assistants write: questions, answers in paragraphs,
  markdown lists and headings, inline code, numbers, the odd non-English phrase;
- `code`: source files and snippets a tool reads or a model writes (Python,
  JavaScript, shell, SQL);
- `json`: tool results as APIs return them: records with ids, timestamps,
  URLs, numbers, base64 and free text, compact or indented;
- `logs`: server logs, test runs, tracebacks, CSV and number tables.

Texts run from a few words to a few KB, as messages do. The token counter's
tests (`tests/context/test_token_estimate.py`) and its benchmark
(`bench/tokens.py`) both use it, so the error they state is over the same texts.
"""

from __future__ import annotations

import base64
import random

KINDS = ("chat", "code", "json", "logs")


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


COMMON = _words(
    "the a an of to and in is it that for on with as was be this are by at or from have not "
    "but we you they he she can will would should could there their what which when how all "
    "one about more if so up out do no time just your some me my like into than then other "
    "also only new now use any these two first well way even because many most our after very "
    "through back still over where much before must good great same right think need know "
    "make see get take find give tell work call try ask seem feel leave keep let begin help "
    "show hear play run move live believe hold bring happen write provide sit stand lose pay "
    "meet include continue set learn change lead understand watch follow stop create speak "
    "read allow add spend grow open walk win offer remember"
)
TECHNICAL = _words(
    "function variable request response server client database query index cache token "
    "message context window model agent tool result error exception timeout retry deployment "
    "container cluster service endpoint configuration parameter argument interface "
    "implementation performance latency throughput memory storage schema migration "
    "transaction connection session authentication authorization permission repository branch "
    "commit merge pipeline build release version dependency package library framework module "
    "component template callback promise async await thread process queue worker scheduler "
    "benchmark regression summary compaction embedding"
)
RARE = _words(
    "idempotency serialization heterogeneous asynchronously backpressure misconfiguration "
    "observability deduplication interoperability nondeterministic tokenization quantization "
    "hyperparameter Kubernetes PostgreSQL OAuth throughput-oriented multi-tenant pre- "
    "allocated re-entrant copy-on-write cryptographically reproducibility parallelizable "
    "unmarshalling incrementally"
)
NAMES = _words(
    "Alice Bob Carol Dmitri Emeka Fatima Guo Hana Ines Jonas Kenji Lena Marta Nadia Omar "
    "Priya Quentin Rosa Sven Tariq Uma Viktor Wen Yusuf Zoe"
)
FOREIGN = (
    "Merci beaucoup pour votre aide.",
    "¿Dónde está la estación de tren más cercana?",
    "Das Ergebnis ist leider noch nicht vollständig.",
    "Это работает, но медленно.",
    "これは テスト です。",
    "我们明天再讨论这个问题。",
    "Olá, tudo bem? Já terminei o relatório.",
    "Grazie, ci vediamo domani alle 10.",
)
LEVELS = ("INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR")
HTTP = ("GET", "GET", "POST", "PUT", "DELETE")
PATHS = ("/api/v1/users", "/api/v1/orders", "/healthz", "/static/app.js", "/search", "/login")


class _Writer:
    """The generators, sharing one `random.Random`."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    # -- pieces ------------------------------------------------------------------------------

    def word(self) -> str:
        roll = self.r.random()
        if roll < 0.70:
            return self.r.choice(COMMON)
        if roll < 0.93:
            return self.r.choice(TECHNICAL)
        if roll < 0.97:
            return self.r.choice(RARE)
        return self.r.choice(NAMES)

    def number(self) -> str:
        roll = self.r.random()
        if roll < 0.4:
            return str(self.r.randint(0, 100))
        if roll < 0.7:
            return f"{self.r.randint(100, 99_999):,}"
        if roll < 0.85:
            return f"{self.r.uniform(0, 100):.{self.r.randint(1, 3)}f}"
        return str(self.r.randint(1_000_000, 9_999_999_999))

    def sentence(self) -> str:
        words = [self.word() for _ in range(self.r.randint(4, 22))]
        for _ in range(self.r.randint(0, 2)):
            i = self.r.randrange(len(words))
            roll = self.r.random()
            if roll < 0.4:
                words[i] = self.number()
            elif roll < 0.6:
                words[i] = f"`{self.identifier()}`"
            elif roll < 0.8:
                words[i] += ","
            else:
                words[i] = f"({words[i]})"
        words[0] = words[0].capitalize()
        if self.r.random() < 0.15:
            words.insert(self.r.randrange(1, len(words) + 1), self.r.choice(["don't", "it's"]))
        return " ".join(words) + self.r.choice([".", ".", ".", "?", "!", ":"])

    def paragraph(self) -> str:
        return " ".join(self.sentence() for _ in range(self.r.randint(1, 6)))

    def identifier(self) -> str:
        parts = [self.r.choice(TECHNICAL) for _ in range(self.r.randint(1, 3))]
        roll = self.r.random()
        if roll < 0.6:
            return "_".join(parts)
        if roll < 0.8:
            return parts[0] + "".join(p.capitalize() for p in parts[1:])
        return "".join(p.capitalize() for p in parts)

    def snake(self) -> str:
        return "_".join(self.r.choice(TECHNICAL) for _ in range(self.r.randint(1, 3)))

    def hex(self, n: int) -> str:
        return "".join(self.r.choice("0123456789abcdef") for _ in range(n))

    def uuid(self) -> str:
        h = self.hex(32)
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def timestamp(self) -> str:
        return (
            f"2026-{self.r.randint(1, 12):02d}-{self.r.randint(1, 28):02d}T"
            f"{self.r.randint(0, 23):02d}:{self.r.randint(0, 59):02d}:"
            f"{self.r.randint(0, 59):02d}.{self.r.randint(0, 999):03d}Z"
        )

    def url(self) -> str:
        host = self.r.choice(["example.com", "docs.example.org", "api.service.io", "github.com"])
        path = "/".join(self.r.choice(TECHNICAL) for _ in range(self.r.randint(1, 4)))
        return f"https://{host}/{path}"

    def ip(self) -> str:
        return ".".join(str(self.r.randint(1, 254)) for _ in range(4))

    # -- chat --------------------------------------------------------------------------------

    def chat(self) -> str:
        roll = self.r.random()
        if roll < 0.3:  # a short user message
            text = self.sentence()
            if self.r.random() < 0.3:
                text = text.lower().rstrip(".!:") + "?"
            if self.r.random() < 0.1:
                text += " " + self.r.choice(FOREIGN)
            return text
        parts = []
        for _ in range(self.r.randint(1, 6)):
            roll = self.r.random()
            if roll < 0.55:
                parts.append(self.paragraph())
            elif roll < 0.75:
                bullet = self.r.choice(["-", "*", "1."])
                items = [f"{bullet} {self.sentence()}" for _ in range(self.r.randint(2, 6))]
                parts.append("\n".join(items))
            elif roll < 0.85:
                parts.append("#" * self.r.randint(1, 3) + " " + self.sentence().rstrip(".!?:"))
            elif roll < 0.95:
                parts.append(f"**{self.word().capitalize()}**: {self.sentence()}")
            else:
                parts.append(self.r.choice(FOREIGN))
        return "\n\n".join(parts)

    # -- code --------------------------------------------------------------------------------

    def python(self) -> str:
        name = self.snake()
        args = ", ".join(f"{self.snake()}: {self.pytype()}" for _ in range(3))
        lines = [f"def {name}({args}) -> {self.pytype()}:", f'    """{self.sentence()}"""']
        for _ in range(self.r.randint(3, 14)):
            indent = "    " * self.r.randint(1, 3)
            roll = self.r.random()
            v = self.snake()
            if roll < 0.3:
                lines.append(f"{indent}{v} = {self.snake()}({self.number()!r})")
            elif roll < 0.45:
                lines.append(f"{indent}if {v} is None or len({v}) > {self.r.randint(0, 99)}:")
            elif roll < 0.6:
                lines.append(f"{indent}for item in {v}.items():")
            elif roll < 0.7:
                lines.append(f"{indent}# {self.sentence()}")
            elif roll < 0.8:
                lines.append(f'{indent}raise ValueError(f"{self.sentence()} {{{v}!r}}")')
            elif roll < 0.9:
                lines.append(f"{indent}self._{v}[{v!r}] = [{v}, {self.number()}]")
            else:
                lines.append(f"{indent}return {v}")
        return "\n".join(lines)

    def pytype(self) -> str:
        return self.r.choice(["int", "str", "list[str]", "dict[str, Any]", "bool", "None"])

    def javascript(self) -> str:
        name = self.identifier()
        lines = [f"export async function {name}(options = {{}}) {{"]
        for _ in range(self.r.randint(3, 12)):
            indent = "  " * self.r.randint(1, 3)
            v = self.identifier()
            roll = self.r.random()
            if roll < 0.3:
                lines.append(f"{indent}const {v} = await fetch(`{self.url()}?id=${{options.id}}`);")
            elif roll < 0.5:
                lines.append(f"{indent}if (!{v}.ok) throw new Error('{self.sentence()}');")
            elif roll < 0.7:
                lines.append(f"{indent}// {self.sentence()}")
            else:
                lines.append(f"{indent}{v}.push({{ id: {self.number()}, name: '{self.word()}' }});")
        lines.append("}")
        return "\n".join(lines)

    def shell(self) -> str:
        commands = []
        for _ in range(self.r.randint(2, 8)):
            roll = self.r.random()
            if roll < 0.3:
                commands.append(f"$ git commit -m '{self.sentence()}'")
            elif roll < 0.6:
                commands.append(
                    f"$ curl -s -X POST {self.url()} -H 'Content-Type: application/json'"
                )
            else:
                commands.append(f"$ ls -la /var/lib/{self.word()}/{self.identifier()}")
        return "\n".join(commands)

    def sql(self) -> str:
        table = self.snake()
        cols = ", ".join(self.snake() for _ in range(self.r.randint(2, 6)))
        return (
            f"SELECT {cols}\nFROM {table}\nWHERE created_at > '{self.timestamp()[:10]}'\n"
            f"  AND status IN ('active', 'pending')\nORDER BY id DESC\n"
            f"LIMIT {self.r.randint(1, 500)};"
        )

    def code(self) -> str:
        makers = [self.python, self.python, self.javascript, self.shell, self.sql]
        return "\n\n".join(self.r.choice(makers)() for _ in range(self.r.randint(1, 4)))

    # -- json --------------------------------------------------------------------------------

    def value(self, depth: int) -> object:
        roll = self.r.random()
        if depth < 2 and roll < 0.12:
            return self.record(depth + 1)
        if depth < 2 and roll < 0.2:
            return [self.value(depth + 1) for _ in range(self.r.randint(0, 4))]
        if roll < 0.35:
            return self.r.randint(0, 100_000)
        if roll < 0.45:
            return round(self.r.uniform(-1000, 1000), self.r.randint(1, 6))
        if roll < 0.5:
            return self.r.choice([True, False, None])
        if roll < 0.6:
            return self.timestamp()
        if roll < 0.64:
            return self.uuid()
        if roll < 0.67:  # an opaque token, a signature, a small file: base64
            data = bytes(self.r.randrange(256) for _ in range(self.r.randint(12, 96)))
            return base64.b64encode(data).decode()
        if roll < 0.73:
            return self.url()
        if roll < 0.85:
            return self.sentence()
        return self.word()

    def record(self, depth: int = 0) -> dict[str, object]:
        keys = [self.snake() for _ in range(self.r.randint(2, 8))]
        return {key: self.value(depth) for key in keys}

    def json(self) -> str:
        import json

        roll = self.r.random()
        if roll < 0.5:  # a list of results
            data: object = {
                "results": [self.record(1) for _ in range(self.r.randint(1, 12))],
                "total": self.r.randint(0, 5000),
                "next_cursor": self.hex(24),
            }
        else:
            data = self.record()
        indent = self.r.choice([None, None, 2])
        return json.dumps(data, indent=indent, ensure_ascii=self.r.random() < 0.5)

    # -- logs --------------------------------------------------------------------------------

    def log_line(self) -> str:
        roll = self.r.random()
        when = self.timestamp()
        if roll < 0.4:
            return (
                f'{self.ip()} - - [{when}] "{self.r.choice(HTTP)} {self.r.choice(PATHS)}'
                f'?page={self.r.randint(1, 50)} HTTP/1.1" '
                f"{self.r.choice([200, 200, 304, 404, 500])}"
                f" {self.r.randint(100, 99999)} {self.r.uniform(0, 2):.3f}"
            )
        if roll < 0.8:
            return (
                f"{when} {self.r.choice(LEVELS):<5} [{self.identifier()}] {self.sentence()} "
                f"request_id={self.uuid()} took={self.r.randint(1, 5000)}ms"
            )
        return (
            f'  File "/srv/app/{self.snake()}.py", line {self.r.randint(1, 900)}, in {self.snake()}'
        )

    def table(self) -> str:
        cols = [self.snake() for _ in range(self.r.randint(3, 7))]
        rows = [",".join(cols)]
        for _ in range(self.r.randint(3, 30)):
            rows.append(",".join(self.number().replace(",", "") for _ in cols))
        return "\n".join(rows)

    def test_run(self) -> str:
        lines = []
        for _ in range(self.r.randint(3, 20)):
            name = self.snake()
            status = self.r.choice(["PASSED", "PASSED", "PASSED", "FAILED", "SKIPPED"])
            lines.append(
                f"tests/test_{self.word()}.py::test_{name} {status} [{self.r.randint(1, 100):3d}%]"
            )
        lines.append(
            f"===== {self.r.randint(1, 500)} passed, {self.r.randint(0, 9)} failed "
            f"in {self.r.uniform(0, 90):.2f}s ====="
        )
        return "\n".join(lines)

    def logs(self) -> str:
        roll = self.r.random()
        if roll < 0.6:
            return "\n".join(self.log_line() for _ in range(self.r.randint(1, 30)))
        if roll < 0.8:
            return self.table()
        return self.test_run()


def corpus(seed: int = 39, per_kind: int = 200) -> dict[str, list[str]]:
    """`per_kind` texts of each kind in `KINDS`, the same for the same seed."""
    writer = _Writer(seed)
    makers = {"chat": writer.chat, "code": writer.code, "json": writer.json, "logs": writer.logs}
    return {kind: [makers[kind]() for _ in range(per_kind)] for kind in KINDS}
