"""stdio binding (§8.2): one JSON value a line, stdout only JSON-RPC, logs on stderr, EOF exits."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from tests.conformance.conftest import (
    PROTOCOL,
    START_TIMEOUT_S,
    StdioClient,
    StoreBackend,
    assert_response_object,
    gateway_command,
    gateway_env,
    spawn_stdio,
)

pytestmark = pytest.mark.integration

PROMPT_EXIT_S = 10.0
"""Closing stdin MUST terminate the server cleanly; 'promptly' is this long at most."""


def line(obj: object) -> bytes:
    return orjson.dumps(obj) + b"\n"


# One session, fed in full and closed: what came out on each stream, and how it ended.
SCRIPT: list[tuple[bytes, object]] = [
    # (line sent, id expected in the answer; ... = no answer)
    (line({"jsonrpc": "2.0", "id": 1, "method": "memory/describe"}), 1),
    (b"\n", ...),
    (b"   \n", ...),
    (b"\t\r\n", ...),
    (
        line({"jsonrpc": "2.0", "id": "two", "method": "memory/recall", "params": {"query": "x"}}),
        "two",
    ),
    (line({"jsonrpc": "2.0", "method": "memory/describe"}), ...),
    (b"{nope\n", None),
    (line({"jsonrpc": "2.0", "id": 3, "method": "memory/remember", "params": {}}), 3),
    (line([]), None),
    (line({"jsonrpc": "2.0", "id": 4, "method": "memory/bogus"}), 4),
    (line({"jsonrpc": "2.0", "id": 5, "method": "memory/timeline", "params": {"limit": 3}}), 5),
    (line({"jsonrpc": "2.0", "id": 6, "method": "memory/consolidate"}), 6),
]


@dataclass(frozen=True)
class Transcript:
    stdout: bytes
    stderr: bytes
    returncode: int


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory, backend: StoreBackend) -> Path:
    return tmp_path_factory.mktemp(f"stdio-eof-{backend.name}")


@pytest.fixture(scope="module")
def transcript(data_dir: Path, backend: StoreBackend) -> Transcript:
    proc = subprocess.Popen(
        [*gateway_command(), "stdio", *backend.config_args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=gateway_env(data_dir),
    )
    try:
        out, err = proc.communicate(b"".join(sent for sent, _ in SCRIPT), timeout=START_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"stdio did not finish after EOF:\n{err[-3000:].decode(errors='replace')}")
    return Transcript(out, err, proc.returncode)


def test_stdout_carries_only_json_rpc_responses(transcript: Transcript) -> None:
    assert transcript.stdout.endswith(b"\n")
    for raw in transcript.stdout.split(b"\n")[:-1]:
        assert_response_object(orjson.loads(raw))


def test_one_answer_per_request_none_for_blank_lines_and_notifications(
    transcript: Transcript,
) -> None:
    answers = [orjson.loads(raw) for raw in transcript.stdout.splitlines()]
    expected = [rid for _, rid in SCRIPT if rid is not ...]
    assert [a["id"] for a in answers] == expected
    by_id = {a["id"]: a for a in answers if a["id"] is not None}
    assert by_id[1]["result"]["protocol"] == PROTOCOL
    assert "records" in by_id["two"]["result"]
    assert by_id[3]["error"]["code"] == -32004
    assert by_id[4]["error"]["code"] == -32601
    assert by_id[6]["error"]["code"] == -32003
    nulls = [a["error"]["code"] for a in answers if a["id"] is None]
    assert nulls == [-32700, -32600]


def test_logs_go_to_stderr(transcript: Transcript) -> None:
    assert transcript.stderr.strip(), "the server logged nothing at all on stderr"
    for raw in transcript.stderr.splitlines():
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        assert not (isinstance(obj, dict) and "jsonrpc" in obj), "a response leaked onto stderr"


def test_eof_exits_with_zero(transcript: Transcript) -> None:
    assert transcript.returncode == 0, transcript.stderr[-2000:]


def test_eof_after_ready_exits_promptly(
    data_dir: Path, backend: StoreBackend, transcript: Transcript
) -> None:
    # Reuses the transcript's (now closed, already indexed) data directory.
    server = spawn_stdio(data_dir, backend.config)
    try:
        server.client.call("memory/describe", timeout=START_TIMEOUT_S)
    except BaseException:
        server.stop()
        raise
    start = time.monotonic()
    code = server.stop(timeout=PROMPT_EXIT_S)
    assert code == 0
    assert time.monotonic() - start < PROMPT_EXIT_S


def test_eof_before_any_input_exits_with_zero(
    data_dir: Path, backend: StoreBackend, transcript: Transcript
) -> None:
    proc = subprocess.Popen(
        [*gateway_command(), "stdio", *backend.config_args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=gateway_env(data_dir),
    )
    out, _ = proc.communicate(b"", timeout=START_TIMEOUT_S)
    assert proc.returncode == 0
    assert out == b""


# -- on the session server -------------------------------------------------------------------------


def test_blank_lines_are_ignored(stdio_client: StdioClient) -> None:
    stdio_client.write(b"\n   \n\t\n\r\n\n")
    stdio_client.write(line({"jsonrpc": "2.0", "id": "after-blanks", "method": "memory/describe"}))
    answer = orjson.loads(stdio_client.next_line())
    assert answer["id"] == "after-blanks"
    assert "result" in answer


def test_crlf_line_endings_are_accepted(stdio_client: StdioClient) -> None:
    stdio_client.write(
        orjson.dumps({"jsonrpc": "2.0", "id": "crlf", "method": "memory/describe"}) + b"\r\n"
    )
    answer = orjson.loads(stdio_client.next_line())
    assert answer["id"] == "crlf"
    assert "result" in answer


def test_pipelined_requests_are_each_answered_once(stdio_client: StdioClient) -> None:
    ids = [f"p{i}" for i in range(20)]
    stdio_client.write(
        b"".join(
            line({"jsonrpc": "2.0", "id": rid, "method": "memory/recall", "params": {"query": rid}})
            for rid in ids
        )
    )
    answers = [orjson.loads(stdio_client.next_line()) for _ in ids]
    assert sorted(a["id"] for a in answers) == sorted(ids)
    assert all("result" in a for a in answers)


def test_newlines_in_content_stay_escaped(stdio_client: StdioClient) -> None:
    # The client reads each answer as exactly one line (§8.2: no unescaped newline), so
    # multi-line content arriving intact proves the newlines were escaped.
    records = stdio_client.call("memory/timeline", {"limit": 50})["records"]
    assert any("\n" in r.get("content", "") for r in records), "no multi-line content to check"


def test_non_ascii_is_utf8(stdio_client: StdioClient) -> None:
    query = "naïve café — 日本語 🧠"
    reply = stdio_client.send(
        orjson.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "memory/recall", "params": {"query": query}}
        )
    )
    reply.body.decode("utf-8")
    assert "result" in reply.response()
