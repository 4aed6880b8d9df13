"""Black-box conformance harness: the real gateway, started as a subprocess, over HTTP and stdio.

The suite is written from the draft (``shared/spec/a2m-0.1.txt``) and from
``docs/protocol.md``, not from the gateway's code: it talks to
``a2m-gateway serve`` / ``a2m-gateway stdio`` exactly as an agent would, with
``A2M_DATA_DIR`` pointing at a fresh directory so the embedded demo store is
indexed from scratch. Every response a test reads through
``Reply.response`` / ``A2MClient.request`` is validated against the project's
A2M 0.1 wire schema (``tests/support/wire.py``). The only gateway imports are
what a test needs as ground truth or as its subject: the documented error codes,
the packaged demo corpus and config, the lexical encoder (to build a store with
vectors) and the in-process binding.

Every store-facing test runs against each installed engine's stores of the packaged
demo corpus (``backend``), which the engine's registry entry points to
(``tests/support/conformance``: each backend seeds its engine and returns the store's
config section): the embedded demo (qdrant-edge, ``serve`` with no ``--config``), the
corpus bulk-loaded into a real Elasticsearch and a real OpenSearch index
(``tests/support/demo_loader.py``) with the demo's mapping and BM25 over ``title^2`` and
``content``, the Qdrant server the environment names, and any engine registered through
``A2M_GATEWAY_ENGINES`` or an entry point that declares backends (the memory engine of
``tests/support/memory_engine``). Each store is named ``demo``. The engines are the
nodes of ``tests/engines/engines.py`` (skipped when absent, failed under
``A2M_REQUIRE_ENGINES=1``). A test of a capability reads describe and skips a store
that does not declare it.

One server per (backend, transport) lives for the whole session (the demo
indexes its corpus at first start, which is the slow part). Tests that want the
same assertions on both transports take the ``client`` fixture, which is
parametrised over ``http`` and ``stdio``; transport-specific tests take
``http_client`` / ``stdio_client`` or start their own process (from
``backend.config_args``).

Nothing here sleeps: a server is ready when ``/readyz`` says so (polled under a
deadline, paced by waiting on the process itself), a stdio answer is the line
that arrives before a deadline, and "no answer" on stdio is proven by a probe
request whose answer arrives first.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml

from gateway.stages.passages import SEPARATOR as PASSAGE_SEPARATOR
from tests.support.conformance import Seeding, conformance_backends
from tests.support.wire import assert_response

PROTOCOL = "a2m/0.1"
CALL_TIMEOUT_S = 30.0
"""Every single call must be answered within this; a hang fails the test, never the run."""
START_TIMEOUT_S = 240.0
"""First start indexes the packaged corpus into qdrant-edge."""
EXIT_TIMEOUT_S = 20.0

TIMESTAMP_RE = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"
"""§3.3: RFC 3339, UTC, `Z`, millisecond precision."""

# docs/protocol.md, written out here rather than imported: the suite is black-box.
METHOD_CAPABILITY: dict[str, str] = {
    "memory/describe": "core",
    "memory/remember": "core",
    "memory/recall": "core",
    "memory/timeline": "core",
    "memory/forget": "core",
    "memory/promote": "tiers",
    "memory/consolidate": "tiers",
    "memory/reinforce": "salience",
    "memory/fetch": "keys",
    "memory/session/list": "sessions",
    "memory/session/close": "sessions",
    "memory/events": "events",
    "memory/events/subscribe": "events",
    "memory/events/unsubscribe": "events",
    "memory/summarize": "summarize",
}
KNOWN_CAPABILITIES = frozenset(
    {
        "core",
        "tiers",
        "salience",
        "keys",
        "sessions",
        "events",
        "summarize",
        "embeddings",
        "external",
        "scopes",
        "prompt",
    }
)
CORE_METHODS = [m for m, cap in METHOD_CAPABILITY.items() if cap == "core"]


class _NoParams:
    """Marks a request sent without a `params` member at all (not even null)."""

    def __repr__(self) -> str:
        return "no-params"


NO_PARAMS: Any = _NoParams()


def gateway_command() -> list[str]:
    """The installed console script of the interpreter running the tests."""
    beside = Path(sys.executable).with_name("a2m-gateway")
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("a2m-gateway")
    if found:
        return [found]
    return [sys.executable, "-m", "gateway"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


CHECKOUT = Path(__file__).resolve().parents[2]
"""The repository: on the gateways' PYTHONPATH, so an engine registered from the test tree
(``A2M_GATEWAY_ENGINES=tests.support.memory_engine``) imports in them too."""


def gateway_env(data_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CHECKOUT), env.get("PYTHONPATH")]))
    env["A2M_DATA_DIR"] = str(data_dir)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-limit:]
    except OSError:
        return ""


# -- replies and errors ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """What came back for one message: an HTTP response, or the stdio line (if any)."""

    transport: str
    body: bytes
    status: int | None = None
    """HTTP status; None on stdio."""
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.body

    def json(self) -> Any:
        return orjson.loads(self.body)

    def response(self) -> dict[str, Any]:
        """The JSON-RPC response object; fails the test if the reply is not one."""
        assert self.body, f"{self.transport}: expected a JSON-RPC response, got nothing"
        obj = self.json()
        assert_response_object(obj)
        # Every response a test reads is held to the project's A2M 0.1 wire schema.
        assert_response(obj, context=self.transport)
        assert isinstance(obj, dict)
        return obj

    def error(self) -> dict[str, Any]:
        obj = self.response()
        assert "error" in obj, f"expected an error, got result {str(obj.get('result'))[:300]}"
        err: dict[str, Any] = obj["error"]
        return err


def assert_response_object(obj: Any) -> None:
    """JSON-RPC 2.0 §5: jsonrpc, id, and exactly one of result / error (code int, message str)."""
    assert isinstance(obj, dict), f"not a response object: {obj!r:.200}"
    assert obj.get("jsonrpc") == "2.0", obj
    assert "id" in obj, obj
    assert ("result" in obj) != ("error" in obj), obj
    if "error" in obj:
        err = obj["error"]
        assert isinstance(err, dict), obj
        assert isinstance(err.get("code"), int), obj
        assert not isinstance(err["code"], bool), obj
        assert isinstance(err.get("message"), str), obj


class RpcError(AssertionError):
    """A call expected to succeed answered with a JSON-RPC error."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')} (data={error.get('data')})")
        self.code = error.get("code")
        self.error = error


def assert_scores(records: list[dict[str, Any]]) -> None:
    """§5.3 on a non-empty result: each score a number in [0, 1], descending, each id once.

    This is the shape of a ranked answer, not proof of ranking (the store sorts what it
    returns): tests that rank compare with the engine's own order or name the record that
    must come first.
    """
    assert records, "an empty result: nothing to check the scores of"
    scores = [r["score"] for r in records]
    for s in scores:
        assert isinstance(s, int | float), s
        assert not isinstance(s, bool), s
        assert 0.0 <= s <= 1.0, s
    assert scores == sorted(scores, reverse=True), scores
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)), "a record appears twice in one result"


def as_fetched(hit: dict[str, Any], fetched: dict[str, Any]) -> dict[str, Any]:
    """A recalled record (without its score) as ``memory/fetch`` returns it.

    A record whose content a store cut to passages (``search.passages``: the demo's long
    sections) is the fetched record with its content replaced by the passages: each
    passage must sit at its ``metadata.passage`` offsets in the fetched content, and the
    rest of the record must be the fetched one's. Any other record comes back as it is.
    """
    record = {k: v for k, v in hit.items() if k != "score"}
    where = (record.get("metadata") or {}).get("passage")
    if where is None:
        return record
    whole = fetched["content"]
    passages = record["content"].split(PASSAGE_SEPARATOR)
    assert [whole[start:end] for start, end in where["offsets"]] == passages
    assert where["length"] == len(whole)
    metadata = {k: v for k, v in record["metadata"].items() if k != "passage"}
    return {**record, "content": whole, "metadata": metadata}


def assert_timestamps(records: list[dict[str, Any]]) -> None:
    for r in records:
        for name in ("created_at", "updated_at"):
            if name in r:
                value = r[name]
                assert isinstance(value, str), f"{name} is not a string: {value!r}"
                assert re.match(TIMESTAMP_RE, value), f"{name} not RFC 3339 UTC ms Z: {value!r}"
                datetime.fromisoformat(value.replace("Z", "+00:00"))


# -- clients ---------------------------------------------------------------------------------------


class A2MClient:
    """One message in, one reply out, over some transport; the helpers build on `send`."""

    transport = "abstract"

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    def send(self, raw: bytes, *, timeout: float = CALL_TIMEOUT_S) -> Reply:
        raise NotImplementedError

    def send_json(self, message: Any, *, timeout: float = CALL_TIMEOUT_S) -> Reply:
        return self.send(orjson.dumps(message), timeout=timeout)

    def request(
        self,
        method: str,
        params: Any = NO_PARAMS,
        *,
        request_id: Any = NO_PARAMS,
        timeout: float = CALL_TIMEOUT_S,
    ) -> dict[str, Any]:
        """Send a request and return the response object, checking the id is echoed."""
        rid = next(self._ids) if request_id is NO_PARAMS else request_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not NO_PARAMS:
            message["params"] = params
        response = self.send_json(message, timeout=timeout).response()
        assert response["id"] == rid, f"id not echoed: sent {rid!r}, got {response['id']!r}"
        assert_response(response, method, context=self.transport)
        return response

    def call(self, method: str, params: Any = NO_PARAMS, *, timeout: float = CALL_TIMEOUT_S) -> Any:
        """The result of a call that must succeed."""
        response = self.request(method, params, timeout=timeout)
        if "error" in response:
            raise RpcError(response["error"])
        return response["result"]

    def error(self, method: str, params: Any = NO_PARAMS) -> dict[str, Any]:
        """The error object of a call that must fail."""
        response = self.request(method, params)
        assert "error" in response, (
            f"{method} should have failed; result: {str(response.get('result'))[:300]}"
        )
        err: dict[str, Any] = response["error"]
        return err

    def error_code(self, method: str, params: Any = NO_PARAMS) -> int:
        code: int = self.error(method, params)["code"]
        return code

    def close(self) -> None:
        pass


class HttpClient(A2MClient):
    """POSTs one message per request to the store endpoint."""

    transport = "http"

    def __init__(self, base_url: str, path: str = "/a2m") -> None:
        super().__init__()
        self.base_url = base_url
        self.path = path
        self.http = httpx.Client(base_url=base_url, timeout=CALL_TIMEOUT_S)

    def post(
        self,
        content: bytes | Iterator[bytes],
        *,
        path: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = CALL_TIMEOUT_S,
    ) -> httpx.Response:
        sent = {"content-type": "application/json"}
        sent.update(headers or {})
        return self.http.post(path or self.path, content=content, headers=sent, timeout=timeout)

    def send(self, raw: bytes, *, timeout: float = CALL_TIMEOUT_S) -> Reply:
        r = self.post(raw, timeout=timeout)
        return Reply("http", r.content, r.status_code, dict(r.headers))

    def close(self) -> None:
        self.http.close()


class StdioClient(A2MClient):
    """Writes one line per message; reads stdout lines on a thread into a queue.

    Whether a message was answered is decided without waiting on a clock: after
    each message the client sends a probe request with its own id, and the
    answer to the message (if any) must arrive before the probe's, since the
    server answers in order. Every line read is kept in `lines` and must be a
    JSON-RPC message: stdout carries nothing else (§8.2).
    """

    transport = "stdio"

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        super().__init__()
        assert proc.stdin is not None
        assert proc.stdout is not None
        self.proc = proc
        self.lines: list[bytes] = []
        self._queue: queue.Queue[bytes | None] = queue.Queue()
        self._lock = threading.Lock()
        self._probes = itertools.count(1)
        self._reader = threading.Thread(target=self._read, args=(proc.stdout,), daemon=True)
        self._reader.start()

    def _read(self, stream: Any) -> None:
        for line in iter(stream.readline, b""):
            self._queue.put(line)
        self._queue.put(None)

    def next_line(self, timeout: float = CALL_TIMEOUT_S) -> bytes:
        try:
            line = self._queue.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"stdio: no line from the server within {timeout}s (hang)")
        if line is None:
            pytest.fail(f"stdio: the server closed stdout (exit code {self.proc.poll()})")
        assert line.endswith(b"\n"), f"stdio: a line without its newline: {line[:200]!r}"
        self.lines.append(line)
        obj = orjson.loads(line)  # raises (fails the test) on anything but JSON
        assert isinstance(obj, dict), line[:300]
        assert obj.get("jsonrpc") == "2.0", line[:300]
        return line

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, raw: bytes, *, timeout: float = CALL_TIMEOUT_S) -> Reply:
        assert b"\n" not in raw, "a stdio message is one line (§8.2)"
        with self._lock:
            probe_id = f"probe-{next(self._probes)}"
            probe = orjson.dumps(
                {"jsonrpc": "2.0", "id": probe_id, "method": "memory/describe", "params": {}}
            )
            self.write(raw + b"\n" + probe + b"\n")
            answers: list[bytes] = []
            deadline = time.monotonic() + timeout
            while True:
                line = self.next_line(max(0.1, deadline - time.monotonic()))
                obj = orjson.loads(line)
                if "method" in obj and "id" not in obj:
                    continue  # a server notification: tolerated while awaiting (§8.2)
                if obj.get("id") == probe_id and "result" in obj:
                    break
                answers.append(line)
            assert len(answers) <= 1, f"stdio: one message got {len(answers)} lines: {answers!r}"
            body = answers[0].rstrip(b"\n") if answers else b""
            return Reply("stdio", body)

    def close(self) -> None:
        """Close stdin (the server's EOF)."""
        with contextlib.suppress(OSError, ValueError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()

    def release(self) -> None:
        """After the process ended: let the reader drain, then close stdout."""
        self._reader.join(timeout=EXIT_TIMEOUT_S)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


# -- processes -------------------------------------------------------------------------------------


@dataclass
class HttpServer:
    proc: subprocess.Popen[bytes]
    base_url: str
    stderr_path: Path
    started_at: float
    ready_after_s: float = 0.0

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=EXIT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=EXIT_TIMEOUT_S)
        return self.proc.returncode


def start_http_server(
    data_dir: Path,
    config: Path | None = None,
    *,
    timeout: float = START_TIMEOUT_S,
    port: int | None = None,
) -> HttpServer:
    """Start `a2m-gateway serve` on a free loopback port and wait until /readyz says ready.

    Raises:
        AssertionError (via pytest.fail): the process exited or did not get ready in time.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()  # given: the config names the gateway's own URL
    # No --host: the default bind is part of what is tested (§8.3.1: loopback).
    cmd = [*gateway_command(), "serve", "--port", str(port)]
    if config is not None:
        cmd += ["--config", str(config)]
    stderr_path = data_dir / f"serve-{port}.stderr"
    with (
        open(data_dir / f"serve-{port}.stdout", "wb") as out,
        open(stderr_path, "wb") as err,
    ):
        started = time.monotonic()
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=gateway_env(data_dir)
        )
    server = HttpServer(proc, f"http://127.0.0.1:{port}", stderr_path, started)
    wait_ready(server, timeout)
    return server


def wait_ready(server: HttpServer, timeout: float) -> None:
    deadline = server.started_at + timeout
    with httpx.Client(base_url=server.base_url, timeout=5.0) as http:
        while True:
            if server.proc.poll() is not None:
                pytest.fail(
                    f"a2m-gateway serve exited with {server.proc.returncode}:\n"
                    + tail(server.stderr_path)
                )
            with contextlib.suppress(httpx.TransportError):
                if http.get("/readyz").status_code == 200:
                    server.ready_after_s = time.monotonic() - server.started_at
                    return
            if time.monotonic() > deadline:
                server.stop()
                pytest.fail(f"not ready within {timeout}s:\n" + tail(server.stderr_path))
            # Pace the poll by waiting on the process: returns at once if it dies.
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.proc.wait(timeout=0.1)


@dataclass
class StdioServer:
    proc: subprocess.Popen[bytes]
    client: StdioClient
    stderr_path: Path

    def stop(self, timeout: float = EXIT_TIMEOUT_S) -> int:
        """Close stdin and wait for the exit; kill only past the deadline (and fail then).

        Raises:
            subprocess.TimeoutExpired: the server did not exit within `timeout` of EOF.
        """
        self.client.close()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=EXIT_TIMEOUT_S)
            raise
        finally:
            self.client.release()
        return self.proc.returncode


def spawn_stdio(data_dir: Path, config: Path | None = None) -> StdioServer:
    """Start `a2m-gateway stdio` (no wait: its first answer comes once the store is open)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    cmd = [*gateway_command(), "stdio"]
    if config is not None:
        cmd += ["--config", str(config)]
    stderr_path = data_dir / "stdio.stderr"
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env=gateway_env(data_dir),
        )
    return StdioServer(proc, StdioClient(proc), stderr_path)


def start_stdio_server(data_dir: Path, config: Path | None = None) -> StdioServer:
    server = spawn_stdio(data_dir, config)
    try:
        server.client.call("memory/describe", {"protocol": PROTOCOL}, timeout=START_TIMEOUT_S)
    except BaseException:
        server.stop()
        sys.stderr.write(tail(server.stderr_path))
        raise
    return server


def write_demo_config(path: Path, data_dir: Path, **server: Any) -> Path:
    """A config file holding the embedded demo store, with `server:` settings overridden."""
    from gateway.demo import default_demo_config

    cfg = default_demo_config(data_dir)
    doc = cfg.model_dump(mode="json", exclude_none=True)
    doc.setdefault("server", {}).update(server)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def max_body_bytes() -> int:
    """The demo server's body limit (every backend's config keeps the packaged demo's)."""
    from gateway.demo import default_demo_config

    return default_demo_config(Path("/nonexistent")).server.max_body_bytes


# -- backends --------------------------------------------------------------------------------------

QDRANT = "qdrant"
"""The embedded demo (qdrant-edge, ``serve`` with no ``--config``)."""
CONFORMANCE = conformance_backends()
"""Every installed engine's backends (connectors.registry, tests/support/conformance)."""
BACKENDS = [
    pytest.param(name, id=name, marks=b.marks)
    for name, b in CONFORMANCE.items()
    if not b.records_only
]
"""Every store-facing test runs on these; a records-only backend only where WITH_RECORDS
adds it."""
RECORDS_MODULES = frozenset({"test_recall", "test_timeline", "test_fetch", "test_records"})
"""The modules that read records (recall, timeline, fetch, the record shape) also run on the
records-only backends: another protocol to the same engine (the Qdrant server over gRPC).
Above the connector the gateway is the same whatever the protocol; the connector's own
paths are tested in tests/connectors."""
WITH_RECORDS = pytest.mark.parametrize(
    "backend",
    [pytest.param(name, id=name, marks=b.marks) for name, b in CONFORMANCE.items()],
    indirect=True,
    scope="session",
)


ENVELOPE = pytest.mark.parametrize("backend", [QDRANT], indirect=True, scope="session")
"""Marks a test the gateway answers before any store is read (the JSON-RPC envelope, method
lookup, read-only and undeclared-capability refusals): the same code answers for every
backend, so it runs on the embedded demo only, over both transports."""


@dataclass(frozen=True)
class StoreBackend:
    """One store the suite runs against, all named ``demo`` and holding the same corpus."""

    name: str
    store: dict[str, Any] | None = None
    """The ``stores.demo`` config section; None for the embedded demo."""
    config: Path | None = None
    """A config file serving it; None for the embedded demo (started without --config)."""

    @property
    def config_args(self) -> list[str]:
        return ["--config", str(self.config)] if self.config is not None else []

    def write_config(self, path: Path, data_dir: Path, **server: Any) -> Path:
        """A config file of this store, with `server:` settings overridden."""
        if self.store is None:
            return write_demo_config(path, data_dir, **server)
        doc: dict[str, Any] = {"stores": {"demo": self.store}}
        if server:
            doc["server"] = dict(server)
        path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        return path

    def gateway_config(self) -> Any:
        """The same store as a GatewayConfig (the demo: as `serve` builds it, in memory)."""
        from gateway.config import load_config
        from gateway.demo import default_demo_config

        if self.config is None:
            return default_demo_config()
        return load_config(self.config)


class Servers:
    """The session's servers, one per (backend, transport), started on first use.

    pytest tears a parametrised session fixture down whenever the next test
    wants another parameter; keeping the processes here (not in those
    fixtures) means each starts once whatever order the tests run in.
    """

    def __init__(self, tmp: pytest.TempPathFactory) -> None:
        self.tmp = tmp
        self.backends: dict[str, StoreBackend] = {}
        self.http: dict[str, HttpServer] = {}
        self.stdio: dict[str, StdioServer] = {}
        self.http_clients: dict[str, HttpClient] = {}

    def backend(self, name: str, request: pytest.FixtureRequest) -> StoreBackend:
        """The store of backend ``name``, seeded by its engine's hook on first use."""
        if name not in self.backends:
            root = self.tmp.mktemp(f"{name}-config")
            store = CONFORMANCE[name].seed(Seeding(root, request.getfixturevalue))
            if store is None:
                self.backends[name] = StoreBackend(name)
            else:
                path = StoreBackend(name, store).write_config(root / "gateway.yaml", root)
                self.backends[name] = StoreBackend(name, store, path)
        return self.backends[name]

    def http_server(self, backend: StoreBackend) -> HttpServer:
        if backend.name not in self.http:
            data_dir = self.tmp.mktemp(f"http-{backend.name}")
            self.http[backend.name] = start_http_server(data_dir, backend.config)
        return self.http[backend.name]

    def http_client(self, backend: StoreBackend) -> HttpClient:
        if backend.name not in self.http_clients:
            self.http_clients[backend.name] = HttpClient(self.http_server(backend).base_url)
        return self.http_clients[backend.name]

    def stdio_server(self, backend: StoreBackend) -> StdioServer:
        if backend.name not in self.stdio:
            data_dir = self.tmp.mktemp(f"stdio-{backend.name}")
            self.stdio[backend.name] = start_stdio_server(data_dir, backend.config)
        return self.stdio[backend.name]

    def close(self) -> None:
        failures: list[BaseException] = []
        for c in self.http_clients.values():
            c.close()
        for http in self.http.values():
            http.stop()
        for stdio in self.stdio.values():
            try:
                stdio.stop()
            except BaseException as exc:  # stop every server, then report
                failures.append(exc)
        if failures:
            raise failures[0]


# -- fixtures --------------------------------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Adds the records-only backends to RECORDS_MODULES' store-facing tests.

    As a mark, before pytest applies parametrize marks and fixture params: a test that
    parametrizes `backend` itself (ENVELOPE) keeps its own.
    """
    module = metafunc.module.__name__.rsplit(".", 1)[-1]
    if module not in RECORDS_MODULES or "backend" not in metafunc.fixturenames:
        return
    if any("backend" in m.args[0] for m in metafunc.definition.iter_markers("parametrize")):
        return
    metafunc.definition.add_marker(WITH_RECORDS)


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    registry = Servers(tmp_path_factory)
    yield registry
    registry.close()


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest, servers: Servers) -> StoreBackend:
    """The store under test: the embedded demo (Qdrant), or the demo corpus in ES / OpenSearch."""
    return servers.backend(request.param, request)


@pytest.fixture(scope="session")
def http_server(servers: Servers, backend: StoreBackend) -> HttpServer:
    return servers.http_server(backend)


@pytest.fixture(scope="session")
def http_client(http_server: HttpServer) -> Iterator[HttpClient]:
    client = HttpClient(http_server.base_url)
    yield client
    client.close()


@pytest.fixture(scope="session")
def stdio_server(servers: Servers, backend: StoreBackend) -> StdioServer:
    return servers.stdio_server(backend)


@pytest.fixture(scope="session")
def stdio_client(stdio_server: StdioServer) -> StdioClient:
    return stdio_server.client


@pytest.fixture(scope="session", params=["http", "stdio"])
def client(request: pytest.FixtureRequest, backend: StoreBackend) -> A2MClient:
    """The same tests over both transports (of every backend).

    `backend` is taken here, not only through the transport fixture: pytest
    parametrises a test by the fixtures it can see statically, and
    `getfixturevalue` is not one of them.
    """
    fixture: A2MClient = request.getfixturevalue(f"{request.param}_client")
    return fixture


@pytest.fixture(scope="session")
def params_client(request: pytest.FixtureRequest, servers: Servers) -> A2MClient:
    """One client (the embedded demo over HTTP) for checks that run before any engine call.

    Params are validated by the dispatcher, whatever the engine or transport: testing
    them on every engine x transport (as `client` does) would only repeat one check.
    """
    backend = servers.backend(QDRANT, request)
    return servers.http_client(backend)


@pytest.fixture(scope="session")
def params_describe(params_client: A2MClient) -> dict[str, Any]:
    result: dict[str, Any] = params_client.call("memory/describe", {"protocol": PROTOCOL})
    return result


_describe_cache: dict[tuple[str, str], dict[str, Any]] = {}


@pytest.fixture
def describe(client: A2MClient, backend: StoreBackend) -> dict[str, Any]:
    """memory/describe of the store behind `client` (called first, as §2 asks of a client)."""
    at = (backend.name, client.transport)
    if at not in _describe_cache:
        _describe_cache[at] = client.call("memory/describe", {"protocol": PROTOCOL})
    return _describe_cache[at]


@dataclass(frozen=True)
class Corpus:
    """What the store holds, read through timeline: the basis for choosing test inputs."""

    records: list[dict[str, Any]]
    max_recall_limit: int

    def with_field(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get(name) not in (None, "")]

    def values(self, name: str) -> list[Any]:
        return list(dict.fromkeys(r[name] for r in self.with_field(name)))


_corpus_cache: dict[tuple[str, str], Corpus] = {}


@pytest.fixture
def corpus(client: A2MClient, backend: StoreBackend, describe: dict[str, Any]) -> Corpus:
    at = (backend.name, client.transport)
    if at not in _corpus_cache:
        limit = int(describe.get("limits", {}).get("max_recall_limit", 100))
        result = client.call("memory/timeline", {"limit": limit})
        # Every loop over the corpus would pass on an empty store.
        assert len(result["records"]) >= 20, "the demo corpus is missing from the store"
        _corpus_cache[at] = Corpus(result["records"], limit)
    return _corpus_cache[at]
