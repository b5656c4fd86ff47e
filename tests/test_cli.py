"""The `pygents-ctx` command line, run for real (`python -m pygents_ctx`) and in-process.

The subprocess tests run the installed command against a SQLite file written
with the store API; the in-process ones (`main(argv)`) cover the edge cases.
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pygents_ctx import (
    ContextConfig,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    UsageRecord,
    count_message_tokens,
    count_tokens,
    from_dict,
)
from pygents_ctx.cli import main
from pygents_ctx.cli._transfer import SessionFile, load_session, parse_session_file, save_session
from pygents_ctx.cli._window import STAGES, parse_strategy
from pygents_ctx.context.stores import (
    MemoryContextStore,
    SQLiteContextStore,
    StoredMessage,
    connect,
)
from pygents_ctx.context.strategies.budget import FitTokens
from pygents_ctx.context.strategies.compose import Pipeline
from pygents_ctx.context.strategies.edits import ClearToolResults
from tests.viewer.store import calls_two_sub_agents

# -- the database the commands look at ------------------------------------------------------


def weather_history() -> list[Message]:
    """A task, three tool rounds (the second call failed), and a final answer."""
    history = [
        Message("system", "You are terse."),
        Message("user", "Check the weather in three cities,\nplease."),
    ]
    for n, city in enumerate(["Oslo", "Lima", "Pune"]):
        history += [
            Message(
                "assistant",
                [
                    TextBlock(f"Looking up {city}."),
                    ToolUseBlock(f"c{n}", "weather", {"city": city}),
                ],
            ),
            Message("user", [ToolResultBlock(f"c{n}", f"{city}: 21°C, light wind", n == 1)]),
        ]
    return [*history, Message("assistant", "Oslo and Pune are fine; Lima failed.")]


ARCHIVED = [
    Message("user", "hi"),
    Message("assistant", [TextBlock("pic"), ImageBlock("image/png", b"x" * 300)]),
]
LIVE = [Message("user", "summary: hi + pic"), Message("user", "a"), Message("assistant", "b")]
ARCHIVE_USAGE = UsageRecord(
    Usage(900, 40, cached_tokens=600),
    run_id="run-7",
    model="model-1",
    estimated_input_tokens=880,
    created_at="2026-11-25T10:00:00.000000+00:00",
)


async def _fill(path: Path) -> None:
    async with connect(path) as conn:
        weather = SQLiteContextStore(conn, session_id="weather")
        await weather.append_many(weather_history())
        await weather.set_context_tokens(1200, 340)
        archive = SQLiteContextStore(conn, session_id="weather-archive")
        await archive.append_many(ARCHIVED[:1])
        await archive.append_many([*ARCHIVED[1:], *LIVE[1:]], run_id="run-7")
        await archive.replace_prefix(2, LIVE[:1])
        await archive.record_usage(ARCHIVE_USAGE)
        await SQLiteContextStore(conn, session_id="idle").set_context_tokens(5, 0)


def build_db(path: Path) -> Path:
    """Three sessions, oldest first: `weather`, `weather-archive` (with an archive), `idle`."""
    asyncio.run(_fill(path))
    return path


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database only read from (tests that write build their own)."""
    return build_db(tmp_path_factory.mktemp("cli") / "ctx.db")


def run_cli(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real command, in a child process, without a $PYGENTS_CTX_DB from outside."""
    env = {key: value for key, value in os.environ.items() if key != "PYGENTS_CTX_DB"}
    return subprocess.run(
        [sys.executable, "-m", "pygents_ctx", *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )


def run_main(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main([str(arg) for arg in args])
    out, err = capsys.readouterr()
    return code, out, err


async def _read(
    path: Path, session_id: str
) -> tuple[list[Message], list[Message], tuple[int, int]]:
    async with connect(path) as conn:
        store = SQLiteContextStore(conn, session_id=session_id)
        everything = await store.get_history(include_archived=True)
        return everything, await store.get_history(), await store.get_context_tokens()


def read_session(
    path: Path, session_id: str
) -> tuple[list[Message], list[Message], tuple[int, int]]:
    """(history with archive, live history, token usage) of a stored session."""
    return asyncio.run(_read(path, session_id))


# -- the real command: every command once ---------------------------------------------------


def test_sessions_lists_every_session_newest_first_in_an_aligned_table(db: Path) -> None:
    result = run_cli("--db", db, "sessions")

    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert header.split() == [
        "session",
        "messages",
        "created",
        "(UTC)",
        "input",
        "output",
        "owner",
        "preview",
    ]
    assert [row.split()[0] for row in rows] == ["idle", "weather-archive", "weather"]
    weather = rows[2]
    assert weather.split()[1] == "9"
    assert weather.split()[4:6] == ["1200", "340"]
    assert weather.endswith("Check the weather in three cities, please.")  # on one line
    end = header.index("messages") + len("messages")
    assert [row[:end].split()[-1] for row in rows] == ["0", "3", "9"]  # numbers align right
    assert result.stderr == ""


def test_sessions_json_reports_each_session_as_list_sessions_does(db: Path) -> None:
    result = run_cli("sessions", "--json", "--db", db)  # options may follow the command

    assert result.returncode == 0, result.stderr
    sessions = orjson.loads(result.stdout)
    assert [s["session_id"] for s in sessions] == ["idle", "weather-archive", "weather"]
    weather = sessions[2]
    assert weather["message_count"] == 9
    assert (weather["input_tokens"], weather["output_tokens"]) == (1200, 340)
    assert weather["preview"] == "Check the weather in three cities,\nplease."
    assert weather["created_at"].endswith("+00:00")
    assert sessions[0]["message_count"] == 0


def test_show_prints_each_message_on_one_line_with_its_tokens_and_the_total(db: Path) -> None:
    history = weather_history()

    result = run_cli("--db", db, "show", "weather")

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["#", "role", "tokens", "content"]
    rows = lines[1:-1]
    assert [row.split()[:3] for row in rows] == [
        [str(i), "tool" if m.has_tool_results else m.role, str(count_message_tokens(m))]
        for i, m in enumerate(history)
    ]
    assert rows[3].split()[1] == "tool"  # a message of tool results, not something the user said
    assert rows[1].endswith("Check the weather in three cities, please.")
    assert rows[2].endswith('Looking up Oslo. | call weather({"city":"Oslo"}) id=c0')
    assert rows[3].endswith("result id=c0: Oslo: 21°C, light wind")
    assert rows[5].endswith("result id=c1 error: Lima: 21°C, light wind")
    assert lines[-1] == f"9 messages, {count_tokens(history)} tokens"


def test_show_archived_json_gives_the_archive_first_and_every_message_whole(db: Path) -> None:
    result = run_cli("--db", db, "--json", "show", "weather-archive", "--archived")

    assert result.returncode == 0, result.stderr
    shown = orjson.loads(result.stdout)
    assert shown["session_id"] == "weather-archive"
    assert (shown["message_count"], shown["total"]) == (3, 5)
    assert [(m["index"], m["archived"]) for m in shown["messages"]] == [
        (0, True),
        (1, True),
        (0, False),
        (1, False),
        (2, False),
    ]
    assert [from_dict(m["message"]) for m in shown["messages"]] == [*ARCHIVED, *LIVE]
    assert [m["tokens"] for m in shown["messages"]] == [
        count_message_tokens(m) for m in [*ARCHIVED, *LIVE]
    ]
    assert shown["tokens"] == count_tokens([*ARCHIVED, *LIVE])


def test_window_shows_what_a_pipeline_keeps_and_edits_against_its_budget(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = weather_history()
    window = asyncio.run(Pipeline([ClearToolResults(1), FitTokens(8000)]).compact(history))
    tokens = count_tokens(window)

    code, out, _ = run_main(
        capsys, "--db", db, "window", "weather", "--strategy", "clear-results:1,fit:8k"
    )

    assert code == 0
    lines = out.splitlines()
    rows = lines[1:-2]
    assert [row.split()[:2] for row in rows] == [
        ["0", "system"],
        ["1", "user"],
        ["2", "assistant"],
        ["3", "user*"],  # cleared: edited by the strategy, at its place in the history
        ["4", "assistant"],
        ["5", "user*"],
        ["6", "assistant"],
        ["7", "user"],
        ["8", "assistant"],
    ]
    assert rows[3].endswith("result id=c0: Done")
    assert lines[-2] == (
        f"window: 9 of 9 messages, {tokens} tokens (history {count_tokens(history)}); "
        f"budget 8000: {8000 - tokens} left"
    )
    assert lines[-1] == "* edited by the strategy"


def test_window_without_a_strategy_is_the_one_context_config_uses_and_says_so(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = weather_history()
    expected = asyncio.run(ContextConfig(MemoryContextStore()).strategy.compact(list(history)))

    code, out, _ = run_main(capsys, "--db", db, "window", "weather")

    assert code == 0
    lines = out.splitlines()
    assert len(lines[1:-2]) == len(expected) == len(history)  # 9 messages: all within 64k
    tokens = count_tokens(expected)
    assert lines[-2] == (
        f"window: 9 of 9 messages, {tokens} tokens (history {tokens}); "
        f"budget 24000: {24000 - tokens} left"
    )
    assert lines[-1] == (
        "strategy: stable (StableWindow(max_tokens=24000, low_water=0.5)), what ContextConfig "
        "uses when given none; --strategy SPEC builds another"
    )
    result = run_cli("--db", db, "window", "weather", "--json")
    shown = orjson.loads(result.stdout)
    assert (shown["strategy"], shown["default_strategy"], shown["budget"]) == (
        "stable",
        True,
        24000,
    )
    chosen = orjson.loads(run_cli("--db", db, "window", "weather", "-s", "fit:8k", "--json").stdout)
    assert chosen["default_strategy"] is False


def test_window_json_maps_each_kept_message_to_its_place_in_the_history(db: Path) -> None:
    result = run_cli("--db", db, "window", "weather", "-s", "rounds:1", "--budget", "20", "--json")

    assert result.returncode == 0, result.stderr
    window = orjson.loads(result.stdout)
    assert (window["strategy"], window["budget"]) == ("rounds:1", 20)
    assert [m["history_index"] for m in window["messages"]] == [0, 1, 8]
    assert not any(m["edited"] for m in window["messages"])
    kept = [weather_history()[i] for i in (0, 1, 8)]
    assert [from_dict(m["message"]) for m in window["messages"]] == kept
    assert window["tokens"] == count_tokens(kept) > 20  # over budget: reported, not an error
    assert window["history_messages"] == 9


def test_export_then_import_recreates_the_session_exactly(db: Path, tmp_path: Path) -> None:
    exported = run_cli("--db", db, "export", "weather-archive")
    assert exported.returncode == 0, exported.stderr
    copy = tmp_path / "copy.db"

    imported = run_cli("--db", copy, "import", "-", stdin=exported.stdout)

    assert imported.returncode == 0, imported.stderr
    assert imported.stdout == "imported 3 messages (2 archived) into session weather-archive\n"
    assert read_session(copy, "weather-archive") == read_session(db, "weather-archive")
    again = run_cli("--db", copy, "export", "weather-archive", "-o", tmp_path / "again.json")
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again.json").read_text() == exported.stdout
    document = orjson.loads(exported.stdout)
    assert list(document) == [
        "version",
        "session_id",
        "input_tokens",
        "output_tokens",
        "archived",
        "archived_run_ids",
        "messages",
        "run_ids",
        "usage",
        "blobs",
        "checkpoint_states",
        "checkpoints",
    ]
    assert document["usage"] == [ARCHIVE_USAGE.to_dict()]
    assert document["blobs"] == document["checkpoints"] == document["checkpoint_states"] == []
    assert [from_dict(m) for m in document["archived"]] == ARCHIVED
    assert (document["archived_run_ids"], document["run_ids"]) == (
        [None, "run-7"],
        [None, "run-7", "run-7"],
    )
    assert asyncio.run(run_ids(copy, "weather-archive")) == asyncio.run(
        run_ids(db, "weather-archive")
    )
    assert asyncio.run(usage_records(copy, "weather-archive")) == [ARCHIVE_USAGE]


THINKING = Message(
    "assistant",
    [
        ReasoningBlock("rs_1", ["Check the tide table."], "gAAAA" + "x" * 40, model="o3"),
        ToolUseBlock("c1", "tides", {"port": "Brest"}),
    ],
)


async def _fill_reasoning(path: Path) -> None:
    async with connect(path) as conn:
        store = SQLiteContextStore(conn, session_id="thought")
        await store.append_many(
            [Message("user", "Tides?"), THINKING, Message("user", [ToolResultBlock("c1", "6 m")])]
        )
        await store.record_usage(UsageRecord(Usage(300, 90, reasoning_tokens=64), model="o3"))


def test_reasoning_and_its_tokens_survive_export_import_and_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, copy = tmp_path / "source.db", tmp_path / "copy.db"
    asyncio.run(_fill_reasoning(source))

    code, exported, err = run_main(capsys, "--db", source, "export", "thought")
    assert code == 0, err
    (tmp_path / "thought.json").write_text(exported)
    code, _, err = run_main(capsys, "--db", copy, "import", tmp_path / "thought.json")
    assert code == 0, err

    everything, _, _ = asyncio.run(_read(copy, "thought"))
    assert everything[1] == THINKING
    [record] = asyncio.run(usage_records(copy, "thought"))
    assert record.usage == Usage(300, 90, reasoning_tokens=64)
    code, shown, err = run_main(capsys, "--db", copy, "show", "thought")
    assert code == 0, err
    assert "reasoning (encrypted, o3): Check the tide table. id=rs_1" in shown


async def run_ids(path: Path, session_id: str) -> list[str | None]:
    """The run id of each stored message, archive first."""
    async with connect(path) as conn:
        snapshot = await SQLiteContextStore(conn, session_id=session_id).snapshot()
    return [stored.run_id for stored in (*snapshot.archived, *snapshot.messages)]


async def usage_records(path: Path, session_id: str) -> list[UsageRecord]:
    async with connect(path) as conn:
        return await SQLiteContextStore(conn, session_id=session_id).get_usage()


def test_a_version_2_file_without_usage_records_still_imports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "v2.json"
    document = SessionFile("old", LIVE, ARCHIVED, 3, 4).to_dict()
    del document["usage"], document["blobs"]
    del document["checkpoint_states"], document["checkpoints"]
    file.write_bytes(orjson.dumps({**document, "version": 2}))

    code, _, err = run_main(capsys, "--db", tmp_path / "new.db", "import", file)

    assert (code, err) == (0, "")
    assert read_session(tmp_path / "new.db", "old") == ([*ARCHIVED, *LIVE], LIVE, (3, 4))
    assert asyncio.run(usage_records(tmp_path / "new.db", "old")) == []


def test_a_version_1_file_without_run_ids_still_imports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "v1.json"
    document = SessionFile("old", LIVE, ARCHIVED, 3, 4).to_dict()
    del document["run_ids"], document["archived_run_ids"], document["usage"], document["blobs"]
    del document["checkpoint_states"], document["checkpoints"]
    file.write_bytes(orjson.dumps({**document, "version": 1}))

    code, _, err = run_main(capsys, "--db", tmp_path / "new.db", "import", file)

    assert (code, err) == (0, "")
    assert read_session(tmp_path / "new.db", "old") == ([*ARCHIVED, *LIVE], LIVE, (3, 4))


@pytest.mark.parametrize(
    ("args", "code", "error"),
    [
        pytest.param(
            ["--db", "{tmp}/missing.db", "sessions"],
            1,
            "pygents-ctx: error: no database at '{tmp}/missing.db'; pass --db PATH",
            id="missing-database",
        ),
        pytest.param(
            ["--db", "{db}", "window", "weather", "-s", "fit:8000,slide:5"],
            2,
            "pygents-ctx window: error: argument -s/--strategy: unknown strategy 'slide' "
            "(did you mean 'sliding'?)",
            id="bad-strategy-spec",
        ),
        pytest.param(
            ["--db", "{tmp}/new.db", "import", "{tmp}/bad.json"],
            1,
            "pygents-ctx: error: {tmp}/bad.json: messages[1].content must be a list of blocks",
            id="malformed-import-file",
        ),
    ],
)
def test_errors_are_one_line_on_stderr_with_an_exit_code_scripts_can_use(
    db: Path, tmp_path: Path, args: list[str], code: int, error: str
) -> None:
    (tmp_path / "bad.json").write_text(
        '{"messages": [{"role": "user", "content": []}, {"role": "user", "content": "hi"}]}'
    )
    fill = {"tmp": str(tmp_path), "db": str(db)}

    result = run_cli(*(arg.format(**fill) for arg in args))

    assert result.returncode == code
    assert error.format(**fill) in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert not (tmp_path / "missing.db").exists()  # inspecting never creates a database
    assert not (tmp_path / "new.db").exists()  # nothing is written for a bad file


def test_output_piped_into_a_reader_that_left_ends_quietly(db: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # like `| head` exiting before the command writes
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pygents_ctx", "--db", str(db), "show", "weather"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=30,
            check=False,
        )
    finally:
        os.close(write_end)

    assert result.returncode == 1
    assert result.stderr == ""


# -- in-process: looking things up -------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "found"),
    [("weather", "weather"), ("weather-", "weather-archive"), ("id", "idle")],
)
def test_a_session_is_found_by_its_id_or_a_unique_prefix(
    db: Path, capsys: pytest.CaptureFixture[str], given: str, found: str
) -> None:
    code, out, _ = run_main(capsys, "--db", db, "--json", "show", given)

    assert code == 0
    assert orjson.loads(out)["session_id"] == found


@pytest.mark.parametrize(
    ("given", "error"),
    [
        (
            "wea",
            "'wea' is the start of 2 session ids (weather-archive, weather); give more of the id",
        ),
        ("weathers", "no session 'weathers' in '{db}'; `pygents-ctx sessions` lists them"),
    ],
)
@pytest.mark.parametrize("command", [["show"], ["window", "-s", "fit:10"], ["export"]])
def test_an_unknown_or_ambiguous_session_is_a_runtime_error(
    db: Path, capsys: pytest.CaptureFixture[str], given: str, error: str, command: list[str]
) -> None:
    code, out, err = run_main(capsys, "--db", db, command[0], given, *command[1:])

    assert (code, out) == (1, "")
    assert err == f"pygents-ctx: error: {error.format(db=db)}\n"


def test_sessions_limit_lists_only_the_newest(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, "--db", db, "sessions", "--limit", "2")

    assert code == 0
    header, *rows = out.splitlines()
    assert header.startswith("session          messages  created (UTC)")
    assert [row.split()[0] for row in rows] == ["idle", "weather-archive"]


def test_the_database_defaults_to_the_environment_variable(
    db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYGENTS_CTX_DB", str(db))

    code, out, _ = run_main(capsys, "sessions", "--json")

    assert code == 0
    assert len(orjson.loads(out)) == 3


def test_the_database_defaults_to_a_file_in_the_current_directory(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYGENTS_CTX_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    shutil.copy(db, tmp_path / "pygents_ctx.db")

    code, out, _ = run_main(capsys, "sessions", "--json")

    assert code == 0
    assert len(orjson.loads(out)) == 3


def _foreign_database(path: Path) -> None:
    with sqlite3.connect(path) as foreign:
        foreign.execute("CREATE TABLE notes (body TEXT)")
    foreign.close()


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda p: p.mkdir(), "is a directory; --db takes a SQLite database file"),
        (lambda p: p.write_text("just some text, " * 10), "is not a SQLite database"),
        (_foreign_database, "is a SQLite database, but not a pygents_ctx store"),
    ],
    ids=["directory", "text-file", "other-sqlite-database"],
)
@pytest.mark.parametrize("command", [["sessions"], ["import", "{file}"]])
def test_a_path_that_is_not_a_store_is_refused_and_left_as_it_was(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make: Any,
    error: str,
    command: list[str],
) -> None:
    target = tmp_path / "target.db"
    make(target)
    file = tmp_path / "session.json"
    file.write_bytes(SessionFile("s", [Message("user", "hi")], []).to_json())
    before = sorted(p.name for p in tmp_path.iterdir())
    content = target.read_bytes() if target.is_file() else None

    code, out, err = run_main(capsys, "--db", target, *(c.format(file=file) for c in command))

    assert (code, out) == (1, "")
    assert error in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no database created beside
    assert (target.read_bytes() if target.is_file() else None) == content  # nor changed


def test_an_empty_store_has_no_sessions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async def create(path: Path) -> None:
        async with connect(path):
            pass

    asyncio.run(create(tmp_path / "empty.db"))

    assert run_main(capsys, "--db", tmp_path / "empty.db", "sessions")[:2] == (
        0,
        f"no sessions in {tmp_path / 'empty.db'}\n",
    )
    assert run_main(capsys, "--db", tmp_path / "empty.db", "sessions", "--json")[:2] == (0, "[]\n")


# -- in-process: show and window ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "labels", "footer"),
    [
        (["weather", "--limit", "2"], ["7", "8"], "2 of 9 messages"),
        (["weather-archive", "--archived"], ["a0", "a1", "0", "1", "2"], "5 messages (2 archived)"),
        (
            ["weather-archive", "--archived", "--limit", "4"],
            ["a1", "0", "1", "2"],
            "4 of 5 messages (1 archived)",
        ),
        (["weather-archive"], ["0", "1", "2"], "3 messages"),
        (["idle"], [], "0 messages, 0 tokens"),
    ],
)
def test_show_numbers_messages_by_their_place_and_says_how_many_it_shows(
    db: Path, capsys: pytest.CaptureFixture[str], args: list[str], labels: list[str], footer: str
) -> None:
    code, out, _ = run_main(capsys, "--db", db, "show", *args)

    assert code == 0
    lines = out.splitlines()
    assert [line.split()[0] for line in lines[1:-1]] == labels
    assert lines[-1].startswith(footer)


def test_show_renders_images_and_results_holding_images(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    image = ImageBlock("image/png", b"\x89PNG")
    messages = [
        Message("user", [TextBlock("look"), image]),
        Message("assistant", [ToolUseBlock("c1", "shot", {})]),
        Message("user", [ToolResultBlock("c1", [TextBlock("a screenshot"), image, image])]),
        Message("assistant", [ToolUseBlock("c2", "shot", {})]),
        Message("user", [ToolResultBlock("c2", "")]),
        Message("assistant", []),
    ]

    async def fill(path: Path) -> None:
        async with connect(path) as conn:
            await SQLiteContextStore(conn, session_id="s").append_many(messages)

    asyncio.run(fill(tmp_path / "ctx.db"))

    code, out, _ = run_main(capsys, "--db", tmp_path / "ctx.db", "show", "s")

    assert code == 0
    rows = out.splitlines()[1:-1]
    assert rows[0].endswith("look | [image image/png, 4 bytes]")
    assert rows[1].endswith("call shot({}) id=c1")
    assert rows[2].endswith("result id=c1: a screenshot [+2 images]")
    assert rows[4].endswith("result id=c2")
    assert rows[5].endswith("(empty)")


def test_long_text_is_clipped_and_a_terminal_clips_lines_to_its_width(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def fill(path: Path) -> None:
        async with connect(path) as conn:
            await SQLiteContextStore(conn, session_id="s").append(Message("user", "word " * 100))

    asyncio.run(fill(tmp_path / "ctx.db"))

    code, out, _ = run_main(capsys, "--db", tmp_path / "ctx.db", "show", "s")
    assert code == 0
    row = out.splitlines()[1]
    assert row.endswith("…")
    assert len(row.split(None, 3)[3]) == 100  # a block's text is clipped, even off a terminal

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.setenv("COLUMNS", "40")
    assert main(["--db", str(tmp_path / "ctx.db"), "show", "s"]) == 0
    lines = terminal.getvalue().splitlines()
    assert max(map(len, lines)) <= 40
    assert lines[1].endswith("…")
    tokens = count_message_tokens(Message("user", "word " * 100))
    assert lines[-1] == f"1 message, {tokens} tokens"  # short lines are not touched


def test_window_marks_messages_it_cannot_place_in_the_history(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Dropping old tool rounds edits two assistant messages and removes two results
    # between them: which history message each edited one came from is not known.
    code, out, _ = run_main(
        capsys, "--db", db, "--json", "window", "weather", "-s", "drop-tool-rounds:1"
    )

    assert code == 0
    window = orjson.loads(out)
    assert [(m["history_index"], m["edited"]) for m in window["messages"]] == [
        (0, False),
        (1, False),
        (None, True),
        (None, True),
        (6, False),
        (7, False),
        (8, False),
    ]
    assert window["budget"] is None
    code, out, _ = run_main(capsys, "--db", db, "window", "weather", "-s", "drop-tool-rounds:1")
    assert [line.split()[:2] for line in out.splitlines()[3:5]] == [["?", "assistant*"]] * 2
    assert "budget" not in out.splitlines()[-2]


@pytest.mark.parametrize(
    "args",
    [
        ["-s", "fit:20"],
        ["-s", "rounds:1", "--budget", "20"],
        ["-s", "rounds:1,fit:9k", "--budget", "20"],
    ],
)
def test_window_over_budget_says_by_how_much(
    db: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    kept = [weather_history()[i] for i in (0, 1, 8)]

    code, out, _ = run_main(capsys, "--db", db, "window", "weather", *args)

    assert code == 0
    assert out.splitlines()[-1].endswith(f"budget 20: over by {count_tokens(kept) - 20}")


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("", "the strategy spec is empty"),
        ("fit", "'fit' needs a number: fit:MAX_TOKENS (e.g. fit:8000)"),
        ("sliding:", "'sliding:' needs a number"),
        ("fit:lots", "'fit:lots': MAX_TOKENS must be a whole number such as fit:8000"),
        ("fit:1:2", "must be a whole number"),
        ("rounds:0", "'rounds:0': TrimRounds max_rounds must be at least 1, not 0"),
        ("fit:8000,,rounds:2", "stage 2 of 'fit:8000,,rounds:2' is empty"),
        ("tokens:5", "unknown strategy 'tokens'; choose from clear-inputs, clear-results"),
    ],
)
def test_a_bad_strategy_spec_is_a_usage_error_that_says_what_is_wrong(
    db: Path, capsys: pytest.CaptureFixture[str], spec: str, error: str
) -> None:
    code, out, err = run_main(capsys, "--db", db, "window", "weather", "--strategy", spec)

    assert code == 2
    assert out == ""
    assert error in err


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("fit:8000", "FitTokens(8000)"),
        ("FIT:128K", "FitTokens(128000)"),
        ("middle-out:1_000", "MiddleOut(1000)"),
        ("sliding", "SlidingWindow(max_messages=100)"),
        ("sliding:50", "SlidingWindow(max_messages=50)"),
        ("stable", "StableWindow(max_tokens=24000, low_water=0.5)"),
        ("stable:16k", "StableWindow(max_tokens=16000, low_water=0.5)"),
        ("rounds:3", "TrimRounds(3)"),
        ("truncate-messages:10", "Truncate(max_messages=10, max_chars=None, on_overflow='keep')"),
        ("truncate-chars:900", "Truncate(max_messages=None, max_chars=900, on_overflow='keep')"),
        ("truncate-results", "TruncateToolResults(500, keep_recent=0, marker="),
        ("clear-results", "ClearToolResults(3, placeholder='Done'"),
        ("clear-inputs:0", "ClearToolInputs(0)"),
        ("drop-tool-rounds", "DropToolRounds(5)"),
        (" clear-results:3 , fit:8000 ", "Pipeline([ClearToolResults(3, "),
    ],
)
def test_each_spec_name_builds_its_strategy(spec: str, expected: str) -> None:
    assert repr(parse_strategy(spec).strategy).startswith(expected)


def test_every_stage_name_is_documented_in_the_guide() -> None:
    guide = (Path(__file__).resolve().parents[1] / "guides" / "cli.md").read_text()

    assert [name for name in STAGES if f"`{name}" not in guide] == []


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ([], "error: the following arguments are required: COMMAND"),
        (["list"], "error: argument COMMAND: invalid choice: 'list'"),
        (["show", "weather", "--limit", "0"], "--limit: must be a whole number of at least 1"),
        (["show", ""], "argument SESSION: must not be empty"),
        (["window", "weather", "-s", "fit:1", "--budget", "0"], "--budget: must be a whole"),
    ],
)
def test_bad_arguments_are_usage_errors(
    db: Path, capsys: pytest.CaptureFixture[str], args: list[str], error: str
) -> None:
    code, out, err = run_main(capsys, "--db", db, *args)

    assert (code, out) == (2, "")
    assert err.startswith("usage: pygents-ctx")
    assert error in err


def test_ctrl_c_exits_130_without_a_traceback(
    db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("pygents_ctx.cli._sessions.sessions", interrupted)

    assert run_main(capsys, "--db", db, "sessions") == (130, "", "")


def test_help_and_version_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, "--version")
    assert (code, out) == (0, "pygents-ctx 0.1.0\n")

    code, out, _ = run_main(capsys, "window", "--help")
    assert code == 0
    assert "clear-results:3,fit:8000" in out
    assert "drop-tool-rounds[:KEEP_RECENT]" in out


# -- in-process: export and import ---------------------------------------------------------------


def test_export_to_a_file_says_what_it_wrote(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "weather.json"

    code, out, _ = run_main(capsys, "--db", db, "export", "weather", "-o", target)

    assert code == 0
    assert out == f"exported 9 messages (0 archived) of session weather to {target}\n"
    file = parse_session_file(target.read_bytes(), "weather.json")
    assert file == SessionFile("weather", weather_history(), [], 1200, 340)
    assert run_main(capsys, "--db", db, "export", "weather")[:2] == (0, target.read_text())


def test_export_to_a_missing_directory_is_a_runtime_error(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_main(
        capsys, "--db", db, "export", "weather", "-o", tmp_path / "no" / "x.json"
    )

    assert code == 1
    assert err.startswith("pygents-ctx: error: ")
    assert "No such file or directory" in err


def test_import_refuses_a_session_that_holds_messages_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = build_db(tmp_path / "ctx.db")
    before = read_session(path, "weather")
    file = tmp_path / "other.json"
    file.write_bytes(SessionFile("weather", [Message("user", "other")], [], 1, 1).to_json())

    code, out, err = run_main(capsys, "--db", path, "import", file)

    assert code == 1
    assert out == ""
    assert err == (
        f"pygents-ctx: error: session 'weather' in '{path}' already holds messages; "
        "import into a new session with --session NEW_ID\n"
    )
    assert read_session(path, "weather") == before


def test_import_fills_an_existing_empty_session_and_sets_its_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = build_db(tmp_path / "ctx.db")
    file = tmp_path / "s.json"
    file.write_bytes(SessionFile("ignored", LIVE, ARCHIVED, 7, 8).to_json())

    code, out, _ = run_main(capsys, "--db", path, "--json", "import", file, "--session", "idle")

    assert code == 0
    assert orjson.loads(out) == {"session_id": "idle", "messages": 3, "archived": 2}
    assert read_session(path, "idle") == ([*ARCHIVED, *LIVE], LIVE, (7, 8))


def test_an_import_that_fails_half_way_leaves_no_session_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pygents_ctx.context.stores import _sqlite_ops

    path = build_db(tmp_path / "ctx.db")
    db = sqlite3.connect(path)
    before = db.execute("SELECT count(*) FROM pygents_sessions").fetchone()
    db.close()
    file = tmp_path / "s.json"
    file.write_bytes(SessionFile("half", LIVE, ARCHIVED, 7, 8).to_json())

    def disk_full(db: object, session_id: str) -> str:  # after the rows, before the commit
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(_sqlite_ops, "first_preview", disk_full)
    code, _, err = run_main(capsys, "--db", path, "import", file)

    assert code == 1
    assert err == "pygents-ctx: error: database or disk is full\n"
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM pygents_sessions").fetchone() == before
    assert db.execute(
        "SELECT (SELECT count(*) FROM pygents_messages WHERE session_id = 'half') + "
        "(SELECT count(*) FROM pygents_archive WHERE session_id = 'half')"
    ).fetchone() == (0,)
    db.close()


def test_import_without_a_session_id_makes_a_new_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "s.json"
    file.write_text('{"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}')

    code, out, _ = run_main(capsys, "--db", tmp_path / "new.db", "import", file)

    assert code == 0
    assert out.startswith("imported 1 message (0 archived) into session ")
    session_id = out.split()[-1]
    assert len(session_id) == 32
    assert read_session(tmp_path / "new.db", session_id) == (
        [Message("user", "hi")],
        [Message("user", "hi")],
        (0, 0),
    )


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (None, "no file at '{file}' to import"),
        ("{not json", "{file} is not valid JSON"),
        ("[]", "{file} must hold a JSON object with a 'messages' list, not a list"),
        ('{"messages": [], "extra": 1}', "{file} has unknown keys 'extra'"),
        ('{"archived": []}', "{file} has no 'messages' list"),
        ('{"version": 6, "messages": []}', "version 6 is not supported; this pygents_ctx"),
        (
            '{"version": 6, "messages": [], "checkpoint_labels": []}',
            "version 6 is not supported; this pygents_ctx reads versions 1 to 5 (upgrade",
        ),
        (
            '{"version": 4, "messages": [], "checkpoints": []}',
            "{file} has unknown keys 'checkpoints'; a version 4 session file holds only",
        ),
        ('{"version": 3, "messages": [], "blobs": []}', "{file} has unknown keys 'blobs'"),
        ('{"messages": [], "blobs": [3]}', "{file}: blobs[0] must be an object of exactly name"),
        (
            '{"messages": [], "blobs": [{"name": "tool-results/00", "content_type": "text/plain",'
            ' "data": "aGk="}]}',
            "{file}: blobs[0]: the data of 'tool-results/00' is not the text its name was made",
        ),
        (
            '{"messages": [], "blobs": [{"name": "n", "content_type": "text/plain",'
            ' "data": "%%%"}]}',
            "{file}: blobs[0]: ",
        ),
        ('{"version": 2, "messages": [], "usage": []}', "{file} has unknown keys 'usage'"),
        ('{"messages": [], "usage": {}}', "{file}: usage must be a list of usage records"),
        ('{"messages": [], "usage": [3]}', "{file}: usage[0] must be an object with a 'usage'"),
        (
            '{"messages": [], "usage": [{"usage": {"input_tokens": -1}}]}',
            "{file}: usage[0]: Usage.input_tokens must be at least 0, not -1",
        ),
        (
            '{"messages": [], "usage": [{"usage": {}, "cost": 1}]}',
            "{file}: usage[0]: UsageRecord has no field 'cost'",
        ),
        ('{"version": "2", "messages": []}', "version '2' is not supported"),
        ('{"version": [2], "messages": []}', "version [2] is not supported"),
        ('{"version": 1, "messages": [], "run_ids": []}', "{file} has unknown keys 'run_ids'"),
        ('{"messages": [], "run_ids": [null]}', "run_ids must be a list with one run id"),
        ('{"messages": [], "archived_run_ids": {}}', "archived_run_ids must be a list"),
        (
            '{"version": 2, "messages": [{"role": "user", "content": []}], "run_ids": [""]}',
            "{file}: run_ids[0] must be a non-empty string or null, not ''",
        ),
        ('{"messages": {}}', "{file}: messages must be a list of messages, not dict"),
        ('{"messages": [3]}', "{file}: messages[0] must be a dict, not int"),
        (
            '{"messages": [{"type": "text", "text": "x"}]}',
            "messages[0] is a TextBlock, not a message",
        ),
        ('{"messages": [{"role": "bot", "content": []}]}', "messages[0]: Message.role must be"),
        ('{"messages": [{"type": "text"}]}', "messages[0]: text block is missing the 'text' field"),
        (
            '{"messages": [], "archived": [{"role": "user", "content": [{"type": "x"}]}]}',
            "archived[0].content[0].type 'x' is unknown",
        ),
        (
            '{"messages": [], "input_tokens": -1}',
            "input_tokens must be a whole number from 0 to 2**63 - 1, not -1",
        ),
        ('{"messages": [], "session_id": 5}', "session_id must be a non-empty string or null"),
    ],
)
def test_a_malformed_import_file_is_a_runtime_error_that_names_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, error: str
) -> None:
    file = tmp_path / "in.json"
    if content is not None:
        file.write_text(content)

    code, out, err = run_main(capsys, "--db", tmp_path / "new.db", "import", file)

    assert code == 1
    assert out == ""
    assert error.format(file=file) in err
    assert not (tmp_path / "new.db").exists()


def test_importing_a_directory_is_a_runtime_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_main(capsys, "--db", tmp_path / "new.db", "import", tmp_path)

    assert code == 1
    assert "is a directory; import takes a file that export wrote" in err


# -- invariant: a session survives the file ----------------------------------------------------

_texts = st.text(max_size=20)
_blocks = (
    st.builds(TextBlock, _texts)
    | st.builds(ImageBlock, st.sampled_from(["image/png", "image/jpeg"]), st.binary(max_size=16))
    | st.builds(
        ToolUseBlock,
        st.text(min_size=1, max_size=6),
        st.text(min_size=1, max_size=6),
        st.dictionaries(
            st.text(max_size=4),
            st.integers(-(2**63), 2**63 - 1)
            | _texts
            | st.floats(allow_nan=False, allow_infinity=False),
            max_size=3,
        ),
    )
    | st.builds(ToolResultBlock, st.text(min_size=1, max_size=6), _texts, st.booleans())
)
# Ids every store takes: no NUL, no lone surrogate (refused alike on every backend).
_id_characters = st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))
_messages = st.lists(
    st.builds(
        StoredMessage,
        st.builds(
            Message, st.sampled_from(["user", "assistant", "system"]), st.lists(_blocks, max_size=3)
        ),
        st.none() | st.text(_id_characters, min_size=1, max_size=4),
    ),
    max_size=5,
)
_files = st.builds(
    SessionFile,
    st.none() | st.text(_id_characters, min_size=1, max_size=8),
    _messages,
    _messages,
    st.integers(min_value=0, max_value=2**40),
    st.integers(min_value=0, max_value=2**40),
)


@settings(max_examples=60, deadline=None)
@given(file=_files)
def test_a_session_written_to_a_file_and_read_into_a_store_comes_back_the_same(
    file: SessionFile,
) -> None:
    async def through_a_store() -> SessionFile:
        store = MemoryContextStore(session_id=file.session_id)
        await save_session(store, file)
        return await load_session(store)

    read = parse_session_file(file.to_json(), "file")
    assert read == file
    loaded = asyncio.run(through_a_store())
    assert (loaded.messages, loaded.archived) == (file.messages, file.archived)
    assert (loaded.input_tokens, loaded.output_tokens) == (file.input_tokens, file.output_tokens)


# -- sub-agents ---------------------------------------------------------------------------


def test_show_marks_a_sub_agents_call_with_its_transcript_and_follows_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "sub.db"

    async def fill() -> list[str]:
        async with connect(path) as conn:
            return await calls_two_sub_agents(lambda s: SQLiteContextStore(conn, session_id=s))

    kept_call, dropped_call = asyncio.run(fill())

    code, out, _ = run_main(capsys, "--db", path, "show", "chat")
    assert code == 0
    (results,) = [line for line in out.splitlines() if f"result id={kept_call}" in line]
    found = re.search(r"\[sub-agent: ([0-9a-f]+)\]", results)
    assert found is not None
    assert "[sub-agent: transcript not kept]" in results  # the second call's result, same row
    code, out, _ = run_main(capsys, "--db", path, "show", found.group(1))
    assert code == 0
    assert "Why tides?" in out
    assert "The Moon pulls." in out
    code, out, _ = run_main(capsys, "--db", path, "--json", "show", "chat")
    assert orjson.loads(out)["subagents"] == {kept_call: found.group(1), dropped_call: None}
    code, out, _ = run_main(capsys, "--db", path, "sessions")
    shown = {line.split()[0] for line in out.splitlines()[1:]}
    assert shown == {"chat", found.group(1)}  # no session for the idle agents


# -- owners and erase ---------------------------------------------------------------


async def _fill_owners(path: Path) -> None:
    async with connect(path) as conn:
        for session_id, owner in (("a-1", "alice"), ("a-2", "alice"), ("b-1", "bob")):
            store = SQLiteContextStore(conn, session_id=session_id, owner=owner)
            await store.append(Message("user", f"secret of {session_id}"))


def test_sessions_owner_and_erase_owner_remove_only_that_owners_sessions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "owners.db"
    asyncio.run(_fill_owners(path))

    code, out, _ = run_main(capsys, "--db", path, "--json", "sessions", "--owner", "alice")
    assert code == 0
    assert sorted((s["session_id"], s["owner"]) for s in orjson.loads(out)) == [
        ("a-1", "alice"),
        ("a-2", "alice"),
    ]
    code, out, _ = run_main(capsys, "--db", path, "sessions", "--owner", "carol")
    assert (code, out.strip()) == (0, f"no sessions of owner 'carol' in {path}")

    code, out, _ = run_main(capsys, "--db", path, "erase", "--owner", "alice")
    assert (code, out.strip()) == (0, f"erased 2 sessions from {path}")
    code, out, _ = run_main(capsys, "--db", path, "--json", "sessions")
    assert [(s["session_id"], s["owner"]) for s in orjson.loads(out)] == [("b-1", "bob")]
    assert b"secret of a-" not in path.read_bytes()  # overwritten, and the WAL emptied
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0

    code, out, _ = run_main(capsys, "--db", path, "--json", "erase", "--session", "b-1")
    assert (code, orjson.loads(out)) == (0, {"erased": 1})


def test_erase_without_owner_or_session_names_the_options_and_erases_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "owners.db"
    asyncio.run(_fill_owners(path))

    code, _, err = run_main(capsys, "--db", path, "erase", "--older-than-days", "1")
    assert code == 1
    assert "--owner OWNER" in err
    assert "--session ID" in err
    assert "nothing was erased" in err
    assert len(asyncio.run(_list(path))) == 3


async def _list(path: Path) -> list[Any]:
    async with connect(path) as conn:
        return await SQLiteContextStore(conn).list_sessions()
