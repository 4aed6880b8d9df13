"""No token, API key, password or Authorization header in any log line; one audit line a call.

Logs are captured at DEBUG, for every logger (the engine clients' and HTTP
libraries' included), through both production formatters, while callers
authenticate, fail to, and hit engines that fail. Then every secret used is
searched for in the captured text. A second test does the same on a real
`a2m-gateway serve` process's stderr.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gateway.observability.logs import JsonFormatter, TextFormatter, redact, scrub
from tests.security.support import (
    AUDIENCE,
    BOB_KEY,
    HS_SECRET,
    ISSUER,
    Issuer,
    MemoryConnector,
    acl_docs,
    asgi_client,
    auth_section,
    bearer,
    build_gateway,
    memory_store_config,
    rpc,
)

ENGINE_PASSWORD = "engine-password-7f3a9c1e"
ENGINE_API_KEY = "engine-api-key-c0ffee4242"
WRONG_KEY = "a2m_this-looks-like-a-key-but-is-not-one-0123456789"
QUERY = "which deploy key rotates every ninety days"


@contextlib.contextmanager
def captured_logs() -> Iterator[io.StringIO]:
    """Every log record at DEBUG, formatted as JSON and as text, into one buffer."""
    out = io.StringIO()
    handlers = []
    for formatter in (JsonFormatter(), TextFormatter()):
        h = logging.StreamHandler(out)
        h.setFormatter(formatter)
        h.setLevel(logging.DEBUG)
        handlers.append(h)
    root = logging.getLogger()
    saved = root.level, {n: logging.getLogger(n).level for n in logging.root.manager.loggerDict}
    root.setLevel(logging.DEBUG)
    for name in saved[1]:
        logging.getLogger(name).setLevel(logging.NOTSET)
    for h in handlers:
        root.addHandler(h)
    try:
        yield out
    finally:
        for h in handlers:
            root.removeHandler(h)
        root.setLevel(saved[0])
        for name, level in saved[1].items():
            logging.getLogger(name).setLevel(level)


def secrets_of(issuer: Issuer, tokens: list[str]) -> list[str]:
    values = [BOB_KEY, WRONG_KEY, HS_SECRET, ENGINE_PASSWORD, ENGINE_API_KEY]
    for t in tokens:
        values.append(t)
        values.extend(part for part in t.split(".") if len(part) > 16)  # header, payload, sig
    return values


def assert_clean(text: str, secrets: list[str]) -> None:
    assert text, "nothing was logged: the capture is broken"
    for s in secrets:
        assert s not in text, f"a secret reached the logs: {s[:8]}..."
    lowered = text.lower()
    assert "authorization" not in lowered
    assert "bearer " not in lowered


def engine_store(backend: str, secret_file: Path) -> dict[str, Any]:
    conn: dict[str, Any] = {"hosts": ["http://127.0.0.1:9"], "timeout_ms": 300, "retries": 0}
    if backend == "elasticsearch":
        conn["api_key"] = ENGINE_API_KEY
    else:
        conn["username"] = "gateway"
        conn["password"] = f"${{file:{secret_file}}}"
    return {
        "backend": backend,
        "index": "docs",
        "connection": conn,
        "mapping": {"content": "body"},
        "search": {"text_fields": ["body"]},
    }


async def test_no_secret_in_any_log_line(issuer: Issuer, tmp_path: Path) -> None:
    secret_file = tmp_path / "pw"
    secret_file.write_text(ENGINE_PASSWORD + "\n")
    # Failed authentications are limited per client address; this test counts every one.
    auth = {**auth_section(issuer), "failures": {"burst": 1000}}
    server = {"auth": auth, "audit": {"log_queries": True}}
    stores = {
        "docs": memory_store_config(scope={"filters": [{"field": "acl", "claims": ["groups"]}]}),
        "es": engine_store("elasticsearch", secret_file),
        "os": engine_store("opensearch", secret_file),
    }
    good = issuer.token(groups=["team-a"])
    tokens = [
        good,
        issuer.token(exp_in=-3600),
        issuer.token(key=issuer.other_rsa_key),
        issuer.token(iss="https://evil.example/"),
        issuer.token(aud="other"),
    ]
    with captured_logs() as out:
        gateway = build_gateway(server, stores, {"docs": MemoryConnector(acl_docs())})
        async with asgi_client(gateway) as client:
            for store in ("docs", "es", "os"):
                for headers in [bearer(good), bearer(BOB_KEY), *map(bearer, tokens[1:])]:
                    for method, params in (
                        ("memory/describe", {}),
                        ("memory/recall", {"query": QUERY}),
                        ("memory/timeline", {}),
                    ):
                        await client.post(
                            f"/a2m/{store}",
                            content=json.dumps(rpc(method, params)),
                            headers={"content-type": "application/json", **headers},
                        )
                for raw in (f"Bearer {WRONG_KEY}", f"Basic {WRONG_KEY}", WRONG_KEY):
                    await client.post(
                        f"/a2m/{store}",
                        content=b"{}",
                        headers={"content-type": "application/json", "authorization": raw},
                    )
        await gateway.close()
    text = out.getvalue()
    assert_clean(text, secrets_of(issuer, tokens))

    # One audit line per admitted call, with the principal; the query only when enabled.
    audits = [json.loads(line) for line in text.splitlines() if '"logger":"a2m.audit"' in line]
    calls = [a for a in audits if a["msg"] == "call"]
    failed = [a for a in audits if a["msg"] == "auth_failed"]
    assert len(calls) == 3 * 2 * 3  # three stores, two valid credentials, three methods
    assert len(failed) == 3 * (4 * 3 + 3)
    assert {a["principal"] for a in calls} == {"jwt/alice", "api_key/bob"}
    assert {a["store"] for a in calls} == {"docs", "es", "os"}
    for a in calls:
        assert {"method", "code", "results", "latency_ms"} <= set(a)
        assert ("query" in a) is (a["method"] == "memory/recall")
    down = [a for a in calls if a["store"] != "docs"]
    # The engines are down: every read is engine unavailable, describe answers from the config.
    assert {a["code"] for a in down if a["method"] != "memory/describe"} == {-32603}
    assert {a["code"] for a in down if a["method"] == "memory/describe"} == {0}
    assert all(a["reason"] for a in failed)


async def test_query_text_is_not_audited_by_default(issuer: Issuer) -> None:
    with captured_logs() as out:
        gateway = build_gateway(
            {"auth": auth_section(issuer)},
            {"docs": memory_store_config()},
            {"docs": MemoryConnector(acl_docs())},
        )
        async with asgi_client(gateway) as client:
            await client.post(
                "/a2m/docs",
                content=json.dumps(rpc("memory/recall", {"query": QUERY})),
                headers={"content-type": "application/json", **bearer(BOB_KEY)},
            )
        await gateway.close()
    assert "audit" in out.getvalue()
    assert QUERY not in out.getvalue()


FORGED = "2026-01-01 00:00:00,000 INFO a2m.audit call store=docs principal=api_key/admin"


@pytest.mark.parametrize(
    "formatter", [TextFormatter(), JsonFormatter()], ids=lambda f: type(f).__name__
)
async def test_caller_text_cannot_forge_an_audit_line(
    issuer: Issuer, formatter: logging.Formatter
) -> None:
    # The method (and, with log_queries, the query) must never be written raw.
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    audit = logging.getLogger("a2m.audit")
    audit.addHandler(handler)
    saved = audit.level
    audit.setLevel(logging.INFO)
    tricks = [f"x\n{FORGED}", f"x\r{FORGED}", f"x\u2028{FORGED}", f"x\x1b[2K\r{FORGED}"]
    try:
        gateway = build_gateway(
            {"auth": auth_section(issuer), "audit": {"log_queries": True}},
            {"docs": memory_store_config()},
            {"docs": MemoryConnector(acl_docs())},
        )
        async with asgi_client(gateway) as client:
            for trick in tricks:
                for method, params in ((trick, {}), ("memory/recall", {"query": trick})):
                    await client.post(
                        "/a2m/docs",
                        content=json.dumps(rpc(method, params)),
                        headers={"content-type": "application/json", **bearer(BOB_KEY)},
                    )
        await gateway.close()
    finally:
        audit.removeHandler(handler)
        audit.setLevel(saved)
    text = out.getvalue()
    lines = text.split("\n")[:-1]
    assert len(lines) == 2 * len(tricks), lines  # one line per call, nothing else
    for line in lines:
        assert line.isprintable(), line  # no CR, no U+2028, no escape sequence
        assert "principal=api_key/bob" in line or '"principal":"api_key/bob"' in line
        assert not line.startswith("2026-01-01"), line


def test_a_traceback_cannot_pose_as_a_record_line() -> None:
    formatter = TextFormatter()
    try:
        raise ValueError(f"bad\n{FORGED}")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, "f", 1, "failed", None, sys.exc_info())
    lines = formatter.format(record).split("\n")
    assert lines[0].endswith("failed")
    assert len(lines) > 2, "the traceback is missing"
    assert all(line.startswith("| ") for line in lines[1:])


# -- the same on a real process --------------------------------------------------------------------


@pytest.mark.integration
def test_a_real_server_logs_no_secret(issuer: Issuer, tmp_path: Path) -> None:
    from gateway.demo import default_demo_config
    from tests.conformance.conftest import free_port, gateway_command, gateway_env

    secret_file = tmp_path / "hs"
    secret_file.write_text(HS_SECRET + "\n")
    pw_file = tmp_path / "pw"
    pw_file.write_text(ENGINE_PASSWORD + "\n")
    data_dir = tmp_path / "data"
    doc = default_demo_config(data_dir / "demo").model_dump(mode="json", exclude_none=True)
    doc["server"].update(
        log_level="debug",
        log_format="json",
        auth={
            "api_keys": auth_section(issuer)["api_keys"],
            "jwt": {
                "issuer": ISSUER,
                "audience": AUDIENCE,
                "algorithms": ["HS256"],
                "secret": f"${{file:{secret_file}}}",
            },
        },
    )
    doc["stores"]["down"] = engine_store("opensearch", pw_file)
    cfg = tmp_path / "gateway.yaml"
    cfg.write_text(yaml.safe_dump(doc))
    port = free_port()
    stderr = tmp_path / "stderr.log"
    good = issuer.token(alg="HS256", groups=["x"])
    bad = [issuer.token(alg="HS256", key="k" * 40), issuer.token(alg="HS256", exp_in=-999)]
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            [*gateway_command(), "serve", "--config", str(cfg), "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=gateway_env(data_dir),
        )
    try:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=60) as http:
            _wait_healthy(http, proc)
            for store in ("demo", "down"):
                for token in [good, BOB_KEY, *bad, WRONG_KEY]:
                    for method in ("memory/describe", "memory/recall"):
                        r = http.post(
                            f"/a2m/{store}",
                            json=rpc(method, {"query": QUERY}),
                            headers=bearer(token),
                        )
                        assert r.status_code == (200 if token in (good, BOB_KEY) else 401)
                        if r.status_code == 200 and store == "demo":
                            assert "result" in r.json()
            assert http.get("/.well-known/a2m-server.json", headers=bearer(good)).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    text = stderr.read_text()
    assert '"a2m.audit"' in text
    assert_clean(text, secrets_of(issuer, [good, *bad]))


def _wait_healthy(http: httpx.Client, proc: subprocess.Popen[bytes]) -> None:
    import time

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"gateway exited with {proc.returncode}")
        with contextlib.suppress(httpx.TransportError):
            if http.get("/healthz").status_code == 200:
                return
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.1)  # paces the poll; returns at once if the process dies
    pytest.fail("gateway not healthy in time")


def test_an_engine_client_failure_is_silent_unless_debugging() -> None:
    """opensearch-py logs each failed attempt with its traceback; the gateway logs its own
    line per change (gateway.resilience.reachability), the client's only when debugging."""
    from gateway.observability.logs import CLIENT_LOGGERS, ENGINE_CLIENT_LOGGERS, configure

    def emitted(level: str) -> str:
        stream = io.StringIO()
        with contextlib.redirect_stderr(stream):
            configure("text", level)
            try:
                raise ConnectionRefusedError("Connect call failed")
            except ConnectionRefusedError:
                logging.getLogger("opensearch").warning(
                    "GET /x/_search [status:N/A]", exc_info=True
                )
                logging.getLogger("gateway.runtime").warning("own failure", exc_info=True)
        return stream.getvalue()

    names = dict.fromkeys([*CLIENT_LOGGERS, *ENGINE_CLIENT_LOGGERS])
    loggers = [logging.getLogger(), *map(logging.getLogger, names)]
    levels = [lg.level for lg in loggers]
    handlers = loggers[0].handlers[:]
    try:
        quiet = emitted("info")
        loud = emitted("debug")
    finally:  # leave logging as pytest set it up
        loggers[0].handlers[:] = handlers
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
    assert "GET /x/_search" not in quiet
    assert "| Traceback" in quiet.split("own failure")[1]  # the gateway's own traces stay
    assert quiet.count("| Traceback") == 1
    assert "GET /x/_search" in loud
    assert loud.count("| Traceback") == 2


def test_start_up_lines_are_not_named_error_and_mcp_posts_log_nothing() -> None:
    """uvicorn's INFO start-up lines read `uvicorn`; the MCP SDK's per-POST INFO line is gone."""
    from gateway.observability.logs import QUIET_LOGGERS, configure

    loggers = [logging.getLogger(), *map(logging.getLogger, QUIET_LOGGERS)]
    levels = [lg.level for lg in loggers]
    handlers = loggers[0].handlers[:]
    stream = io.StringIO()
    try:
        with contextlib.redirect_stderr(stream):
            configure("text", "info")
            logging.getLogger("uvicorn.error").info("Uvicorn running on http://127.0.0.1:1")
            logging.getLogger("uvicorn.error").error("Exception in ASGI application")
            logging.getLogger("mcp.server.streamable_http").info("Terminating session: None")
            logging.getLogger("mcp.server.streamable_http").warning("a real SDK warning")
    finally:  # leave logging as pytest set it up
        loggers[0].handlers[:] = handlers
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
    out = stream.getvalue()
    assert " INFO uvicorn Uvicorn running on" in out
    assert " ERROR uvicorn Exception in ASGI application" in out
    assert "uvicorn.error" not in out
    assert "Terminating session" not in out
    assert "a real SDK warning" in out


_SECRETISH = st.sampled_from(
    [
        "Authorization: Basic dXNlcjpwYXNz",
        "api_key=abcdef123",
        "API-KEY: zz",
        "x-api-key=0123456789",
        "https://user:pw@host/",
        "TOKEN",
        "Bearer abcdefghij",
        "password='s3cret'",
        "\u212aey",  # the Kelvin sign: a k to a case-insensitive regex, not to str.lower()
        "api\u212aey=abcdefgh",
        "pa\u017fsword=x",  # the long s
        "@",
    ]
)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(st.lists(st.one_of(_SECRETISH, st.text(max_size=12)), max_size=6).map("".join))
@example("principal=anonymous code=0 results=10 latency_ms=2.345")
@example("Api_Key: abcdefgh")
def test_the_quick_secret_check_never_lets_a_redaction_through(text: str) -> None:
    """scrub skips the redaction only where it would change nothing."""
    assert scrub(text) == redact(text)
