"""`python -m bench service`: the served example (examples/service) under load, then checked.

It starts, as real processes on 127.0.0.1: the fake model server
(`bench/fake_openai.py`, each reply after `--latency` seconds), a fresh
database (a SQLite file, or with `--postgres` a throwaway PostgreSQL server),
and uvicorn with `--workers` worker processes serving the app. Then
`--sessions` clients at once each send `--turns` messages to their own session,
one after another, reading each answer's server-sent events to the end; every
turn makes two model calls (a tool call, then the answer after the tool's result).

It reports:

- throughput: answered turns per second of the whole drive;
- turn latency: from sending a message to its `done` event, p50 and p99;
- the runtime's added latency: a turn's latency minus the model's own time in
  it (2 x `--latency`), p50 and p99: what the HTTP hop, the loop, the tool, the
  store and the SDK added, queueing on this machine included;
- one client alone (before the load, `--alone` turns in one session): a turn's p50,
  beside the p50 of the same two model calls made directly with the OpenAI SDK
  in a conversation of the same length: what serving a turn costs without
  queueing (most of a call's own cost is the SDK's, and grows with the history);
- the check: each session's transcript, read back with `GET /sessions/{id}`,
  holds every message sent, once, in order, each answered (nothing lost,
  nothing duplicated), and is valid for the provider (see `transcript_problems`);
  the model server counted exactly two calls per turn.

It exits 1 when any turn failed or the check found a problem, and stops by
itself: the turns are counted, and the whole drive has `--timeout` seconds.
The results go to bench/out/service.json (one entry per backend; `--out`
elsewhere); `--markdown` prints them as the table of guides/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).parent / "out" / "service.json"
APP = "examples.service.app:create_app"
START_TIMEOUT = 60.0  # seconds for a server to come up
STOP_TIMEOUT = 30.0
PG_SERVER_CONNECTIONS = 36  # of the throwaway server's 40, a few kept for psql and the like


# -- the processes --------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _stop(process: subprocess.Popen[Any]) -> None:
    """SIGTERM (uvicorn shuts its workers down cleanly), then SIGKILL if it hangs."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def fake_model(latency: float) -> Iterator[str]:
    """The fake model server as a process; yields its base URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.fake_openai", "--latency", str(latency)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # "listening on http://127.0.0.1:PORT"
        if not line.startswith("listening on "):
            raise RuntimeError(f"the fake model server did not start (it said {line!r})")
        yield line.split()[-1] + "/v1"
    finally:
        _stop(process)


@contextlib.contextmanager
def database(postgres: bool, directory: Path, workers: int) -> Iterator[dict[str, str]]:
    """A fresh database; yields the environment that points the app at it."""
    if not postgres:
        yield {"PYGENTS_DB": str(directory / "service.db")}
        return
    # The tests' throwaway server (initdb into a temporary directory, unix socket only),
    # which takes PG_SERVER_CONNECTIONS: the workers share them.
    from tests import postgres_server

    per_worker = min(4, PG_SERVER_CONNECTIONS // workers)
    server = postgres_server.start()
    try:
        yield {"DATABASE_URL": server.dsn, "PG_CONNECTIONS": str(per_worker)}
    finally:
        server.stop()


@contextlib.contextmanager
def service(workers: int, env: dict[str, str], log: Path) -> Iterator[str]:
    """uvicorn serving the example with `workers` processes; yields its base URL."""
    port = _free_port()
    command = [
        sys.executable, "-m", "uvicorn", APP, "--factory", "--host", "127.0.0.1",
        "--port", str(port), "--workers", str(workers), "--no-access-log",
        "--log-level", "warning", "--timeout-graceful-shutdown", "20",
    ]  # fmt: skip
    with log.open("w") as output:
        process = subprocess.Popen(
            command, cwd=ROOT, env={**os.environ, **env}, stdout=output, stderr=output
        )
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_until_up(url, process, log)
            yield url
        finally:
            _stop(process)


def _wait_until_up(url: str, process: subprocess.Popen[Any], log: Path) -> None:
    import httpx2

    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"uvicorn exited ({process.returncode}):\n{log.read_text()}")
        with contextlib.suppress(httpx2.TransportError):
            if httpx2.get(f"{url}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"uvicorn did not answer within {START_TIMEOUT:g} s:\n{log.read_text()}")


# -- the drive ---------------------------------------------------------------------------


def question(session: int, turn: int) -> str:
    return f"session {session} turn {turn}: where is my parcel?"


def session_id(session: int) -> str:
    return f"bench-{session}"


@dataclass
class Drive:
    """What the clients saw."""

    latencies: list[float] = field(default_factory=list)  # seconds per answered turn
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0


async def _events(response: Any) -> list[tuple[str, dict[str, Any]]]:
    """The server-sent events of a response, as (name, data)."""
    events, name = [], "message"
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            events.append((name, json.loads(line[len("data: ") :])))
            name = "message"
    return events


def turn_problems(sent: str, events: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """What is wrong with one answer's events: one tool call and result, then the answer."""
    names = [name for name, _ in events]
    problems = []
    if "error" in names:
        problems.append(f"an error event: {dict(events)['error']}")
    if names.count("tool_call") != 1 or names.count("tool_result") != 1:
        problems.append(f"expected one tool call and one result, got events {names}")
    done = [data for name, data in events if name == "done"]
    if len(done) != 1 or names[-1] != "done":
        problems.append(f"expected the stream to end with one done event, got {names}")
    elif not done[0]["text"].startswith(f"answer to {sent}:"):
        problems.append(f"the answer {done[0]['text']!r} is not the answer to {sent!r}")
    else:
        texts = "".join(data["text"] for name, data in events if name == "text")
        if texts != done[0]["text"]:
            problems.append(f"the text events {texts!r} do not add up to the answer")
    return problems


async def drive(url: str, sessions: int, turns: int, time_limit: float, first: int = 0) -> Drive:
    """`sessions` clients at once, each sending `turns` messages in turn; at most `time_limit` s."""
    import httpx2

    result = Drive()
    limits = httpx2.Limits(max_connections=sessions, max_keepalive_connections=sessions)

    async def client_of(client: httpx2.AsyncClient, session: int) -> None:
        for turn in range(turns):
            sent = question(session, turn)
            start = time.perf_counter()
            path = f"/sessions/{session_id(session)}/messages"
            try:
                async with client.stream("POST", path, json={"content": sent}) as response:
                    if response.status_code != 200:
                        body = (await response.aread()).decode(errors="replace")
                        result.failures.append(f"{sent!r}: HTTP {response.status_code} {body}")
                        continue
                    events = await _events(response)
            except httpx2.HTTPError as exc:  # a worker died, a connection broke
                result.failures.append(f"{sent!r}: {type(exc).__name__}: {exc}")
                continue
            elapsed = time.perf_counter() - start
            problems = turn_problems(sent, events)
            if problems:
                result.failures += [f"{sent!r}: {problem}" for problem in problems]
            else:
                result.latencies.append(elapsed)

    start = time.perf_counter()
    async with httpx2.AsyncClient(base_url=url, limits=limits, timeout=time_limit) as client:
        try:
            async with asyncio.timeout(time_limit):
                await asyncio.gather(
                    *(client_of(client, s) for s in range(first, first + sessions))
                )
        except TimeoutError:
            result.failures.append(f"the drive did not finish within {time_limit:g} s")
    result.seconds = time.perf_counter() - start
    return result


async def direct_sdk(model_url: str, turns: int) -> list[float]:
    """Seconds per turn of the same two model calls made directly with the OpenAI SDK, one
    turn after another in one conversation (the question with the tools, then the tool's
    result), as the service makes them for one client: the floor under a served turn."""
    from openai import AsyncOpenAI

    from examples.service.app import INSTRUCTIONS, TOOLS
    from pygents_ctx import to_openai_tools

    tools = to_openai_tools(TOOLS)
    seconds = []
    async with AsyncOpenAI(base_url=model_url, api_key="unused", max_retries=0) as client:

        async def streamed(messages: list[dict[str, Any]]) -> list[Any]:
            stream = await client.chat.completions.create(  # type: ignore[call-overload]
                model="fake",
                messages=messages,
                tools=tools,
                stream=True,
                stream_options={"include_usage": True},
            )
            return [chunk async for chunk in stream]

        messages: list[dict[str, Any]] = [{"role": "system", "content": INSTRUCTIONS}]
        for turn in range(turns):
            messages.append({"role": "user", "content": question(-1, turn)})
            start = time.perf_counter()
            chunks = await streamed(messages)
            call = next(
                c.choices[0].delta.tool_calls[0]
                for c in chunks
                if c.choices and c.choices[0].delta.tool_calls
            )
            messages += [
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": call.id, "type": "function", "function": {
                        "name": call.function.name, "arguments": call.function.arguments}}
                ]},
                {"role": "tool", "tool_call_id": call.id, "content": "no FAQ entry matches"},
            ]  # fmt: skip
            answer = "".join(
                c.choices[0].delta.content or "" for c in await streamed(messages) if c.choices
            )
            messages.append({"role": "assistant", "content": answer})
            seconds.append(time.perf_counter() - start)
    return seconds


# -- the check ---------------------------------------------------------------------------


def transcript_problems(messages: list[dict[str, Any]], sent: list[str]) -> list[str]:
    """What makes an OpenAI-format transcript wrong for the messages `sent` to it.

    Valid for the provider: it starts with a user message; each assistant
    message has text or tool calls (never neither); each tool call is answered
    by exactly one `tool` message, right after its assistant message, in the
    calls' order, and no tool message answers anything else; a user message
    follows only an answer (an assistant message with text and no calls) or
    comes first; it ends with an answer. Nothing lost, nothing duplicated: the
    user messages are exactly `sent`, in order, and each answer is the one to
    the user message before it.
    """
    problems: list[str] = []
    users = [m.get("content") for m in messages if m.get("role") == "user"]
    if users != sent:
        problems.append(f"the user messages are {users}, not the {len(sent)} sent {sent}")
    open_calls: list[str] = []  # the last assistant message's calls not yet answered
    previous: dict[str, Any] | None = None
    asked: str | None = None
    for index, message in enumerate(messages):
        role, where = message.get("role"), f"message {index}"
        if role == "tool":
            expected = open_calls.pop(0) if open_calls else None
            if message.get("tool_call_id") != expected:
                problems.append(
                    f"{where}: a result for {message.get('tool_call_id')!r} where "
                    f"{expected!r} was due"
                )
        elif open_calls:
            problems.append(f"{where}: {role} message before the results of {open_calls}")
            open_calls = []
        if role == "user":
            answered = previous is None or (
                previous.get("role") == "assistant" and not previous.get("tool_calls")
            )
            if not answered:
                problems.append(f"{where}: a user message after an unanswered {previous}")
            asked = message.get("content")
        elif role == "assistant":
            calls = [call["id"] for call in message.get("tool_calls") or []]
            text = message.get("content")
            if not calls and not text:
                problems.append(f"{where}: an empty assistant message")
            if previous is None or previous.get("role") == "assistant":
                problems.append(f"{where}: an assistant message that answers nothing")
            if len(set(calls)) != len(calls):
                problems.append(f"{where}: duplicate tool call ids {calls}")
            if (
                not calls
                and text
                and asked is not None
                and not text.startswith(f"answer to {asked}:")
            ):
                problems.append(f"{where}: the answer {text!r} does not answer {asked!r}")
            open_calls = calls
        elif role != "tool":
            problems.append(f"{where}: unexpected role {role!r}")
        previous = message
    if not messages:
        problems.append("no messages")
    elif previous is None or previous.get("role") != "assistant" or previous.get("tool_calls"):
        problems.append(f"it ends with {previous}, not an answer")
    return problems


async def check(url: str, sessions: int, turns: int) -> tuple[int, list[str]]:
    """Read every session back; return the messages read and the problems found."""
    import httpx2

    problems: list[str] = []
    read = 0
    async with httpx2.AsyncClient(base_url=url, timeout=60) as client:
        for session in range(sessions):
            response = await client.get(f"/sessions/{session_id(session)}?format=openai")
            if response.status_code != 200:
                problems.append(f"session {session}: HTTP {response.status_code} {response.text}")
                continue
            messages = response.json()["messages"]
            read += len(messages)
            sent = [question(session, turn) for turn in range(turns)]
            problems += [f"session {session}: {p}" for p in transcript_problems(messages, sent)]
    return read, problems


async def model_calls(model_url: str) -> int:
    import httpx2

    async with httpx2.AsyncClient(timeout=10) as client:
        response = await client.get(f"{model_url}/stats")
        return int(response.json()["completions"])


# -- the run -----------------------------------------------------------------------------


def percentile(values: list[float], share: float) -> float:
    """The nearest-rank percentile (`share` in 0..1) of `values`; NaN when there are none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


async def _measure(options: argparse.Namespace, url: str, model_url: str) -> dict[str, Any]:
    # One client alone first (it also warms the workers up): the cost of a turn without queueing.
    alone = await drive(url, 1, options.alone, options.timeout, first=options.sessions)
    sdk = await direct_sdk(model_url, options.alone)
    result = await drive(url, options.sessions, options.turns, options.timeout)
    result.failures += alone.failures
    read, problems = await check(url, options.sessions, options.turns)
    calls = await model_calls(model_url.removesuffix("/v1"))
    expected_calls = 2 * (options.sessions * options.turns + 2 * options.alone)
    if calls != expected_calls:
        problems.append(f"the model was called {calls} times, not {expected_calls}")
    model_time = 2 * options.latency
    added = [latency - model_time for latency in result.latencies]
    turns = len(result.latencies)
    return {
        "backend": "postgres" if options.postgres else "sqlite",
        "sessions": options.sessions,
        "turns_per_session": options.turns,
        "workers": options.workers,
        "model_latency_s": options.latency,
        "turns": turns,
        "seconds": result.seconds,
        "turns_per_s": turns / result.seconds if result.seconds else 0.0,
        "latency_ms": {
            "p50": 1000 * percentile(result.latencies, 0.5),
            "p99": 1000 * percentile(result.latencies, 0.99),
        },
        "added_latency_ms": {
            "p50": 1000 * percentile(added, 0.5),
            "p99": 1000 * percentile(added, 0.99),
        },
        "one_client_ms": {
            "turn_p50": 1000 * percentile(alone.latencies, 0.5),
            "direct_sdk_p50": 1000 * percentile(sdk, 0.5),
        },
        "model_calls": calls,
        "check": {
            "passed": not result.failures
            and not problems
            and turns == options.sessions * options.turns,
            "transcripts": options.sessions,
            "messages": read,
            "failed_turns": result.failures[:20],
            "problems": problems[:20],
        },
    }


def run(options: argparse.Namespace) -> dict[str, Any]:
    """Start everything, drive, check, stop everything; return the measurement."""
    directory = Path(tempfile.mkdtemp(prefix="pygents-service-"))
    try:
        with (
            fake_model(options.latency) as model_url,
            database(options.postgres, directory, options.workers) as env,
        ):
            env |= {"OPENAI_BASE_URL": model_url, "OPENAI_API_KEY": "unused", "MODEL": "fake"}
            with service(options.workers, env, directory / "uvicorn.log") as url:
                return asyncio.run(_measure(options, url, model_url))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _about() -> dict[str, str]:
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
    }


def describe(r: dict[str, Any]) -> str:
    check, alone = r["check"], r["one_client_ms"]
    lines = [
        f"{r['backend']}: {r['sessions']} sessions x {r['turns_per_session']} turns, "
        f"{r['workers']} workers, model latency {1000 * r['model_latency_s']:g} ms",
        f"  {r['turns']} turns in {r['seconds']:.2f} s: {r['turns_per_s']:.1f} turns/s",
        f"  turn latency p50 {r['latency_ms']['p50']:.1f} ms, p99 {r['latency_ms']['p99']:.1f} ms",
        f"  added by the runtime p50 {r['added_latency_ms']['p50']:.1f} ms, "
        f"p99 {r['added_latency_ms']['p99']:.1f} ms",
        f"  one client alone: a turn p50 {alone['turn_p50']:.1f} ms, the same two model calls "
        f"made directly with the SDK p50 {alone['direct_sdk_p50']:.1f} ms",
        f"  check: {'passed' if check['passed'] else 'FAILED'} ({check['transcripts']} "
        f"transcripts, {check['messages']} messages, {r['model_calls']} model calls)",
    ]
    lines += [f"    {line}" for line in check["failed_turns"] + check["problems"]]
    return "\n".join(lines)


def markdown(saved: dict[str, Any]) -> str:
    """The saved runs as the table of guides/performance.md."""
    rows = [
        "| backend | workers | sessions x turns | turns/s | turn latency p50 / p99 "
        "| added under load p50 / p99 | one client: turn / direct SDK p50 | transcripts |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in saved["runs"].values():
        check, alone = r["check"], r["one_client_ms"]
        verdict = f"{check['transcripts']}, {check['messages']} messages " + (
            "✓" if check["passed"] else "FAILED"
        )
        rows.append(
            f"| {r['backend']} | {r['workers']} | {r['sessions']} x {r['turns_per_session']} "
            f"| {r['turns_per_s']:.1f} | {r['latency_ms']['p50']:.0f} / "
            f"{r['latency_ms']['p99']:.0f} ms | {r['added_latency_ms']['p50']:.0f} / "
            f"{r['added_latency_ms']['p99']:.0f} ms | {alone['turn_p50']:.0f} / "
            f"{alone['direct_sdk_p50']:.0f} ms | {verdict} |"
        )
    return "\n".join(rows)


def parse(arguments: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench service", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--sessions", type=int, default=100, help="clients at once (100)")
    parser.add_argument("--turns", type=int, default=5, help="messages per session (5)")
    parser.add_argument("--workers", type=int, default=4, help="uvicorn worker processes (4)")
    parser.add_argument("--postgres", action="store_true", help="a throwaway PostgreSQL server")
    parser.add_argument(
        "--latency", type=float, default=0.05, help="seconds the fake model takes (0.05)"
    )
    parser.add_argument(
        "--alone", type=int, default=20, help="turns of one client alone, before the load (20)"
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="the drive's limit (300 s)")
    parser.add_argument("--out", type=Path, default=OUT, help="where the results go")
    parser.add_argument("--markdown", action="store_true", help="print the saved runs' table")
    options = parser.parse_args(arguments)
    for name in ("sessions", "turns", "workers", "alone"):
        if getattr(options, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if options.postgres and options.workers > PG_SERVER_CONNECTIONS:
        parser.error(f"--postgres takes at most {PG_SERVER_CONNECTIONS} --workers")
    if options.latency < 0 or options.timeout <= 0:
        parser.error("--latency must be >= 0 and --timeout > 0")
    return options


def main(arguments: list[str]) -> int:
    options = parse(arguments)
    out: Path = options.out
    saved: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {"runs": {}}
    if options.markdown:
        print(markdown(saved))
        return 0
    result = {**_about(), **run(options)}
    print(describe(result))
    saved["runs"][result["backend"]] = result
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(saved, indent=2))
    return 0 if result["check"]["passed"] else 1
