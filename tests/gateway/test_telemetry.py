"""The tracing switch: the standard OTEL_* variables, read the SDK's way, in a fresh process.

Each case runs a gateway in a child process (an in-memory store, so no engine
is involved) with only the environment changed, makes one A2M call and says
what was exported: with the console exporter on stdout, with OTLP to a
collector on loopback run by the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway.observability.telemetry import requested
from tests.support.otlp import otlp_collector, span_names

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import asyncio, json, sys
from gateway.observability import telemetry
from tests.security.support import MemoryConnector, acl_docs, build_gateway

on = telemetry.configure_from_env()
store = {"backend": "qdrant", "index": "m", "connection": {"location": ":memory:"},
         "mapping": {"content": "body", "key": "k"},
         "search": {"mode": "lexical", "sparse_vector": "s"}}
gateway = build_gateway({}, {"s": store}, {"s": MemoryConnector(acl_docs(5))})

async def main() -> int:
    await gateway.start()
    result = await gateway.dispatcher("s").dispatch("memory/recall", {"query": "deploy keys"})
    return len(result["records"])

count = asyncio.run(main())
telemetry.shutdown()
print("PROBE " + json.dumps({
    "on": on, "records": count,
    "sdk_loaded": "opentelemetry.sdk" in sys.modules,
    "tracing_loaded": "gateway.observability.tracing" in sys.modules,
}))
"""
IMPORT_ONLY = """
import sys
import gateway.runtime, gateway.a2m.dispatcher, gateway.observability.telemetry
print(sorted(m for m in sys.modules
             if m.startswith("opentelemetry") or m == "gateway.observability.tracing"))
"""


def _clean_env(**otel: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return {**env, **otel}


def _probe(**otel: str) -> tuple[dict[str, Any], str, str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=_clean_env(**otel),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("PROBE "))
    summary: dict[str, Any] = json.loads(line.removeprefix("PROBE "))
    assert summary["records"] > 0  # the gateway served the call whatever tracing did
    return summary, done.stdout, done.stderr


def test_the_switch_is_the_exporter_variable_unless_the_sdk_is_disabled() -> None:
    assert not requested({})
    assert not requested({"OTEL_TRACES_EXPORTER": "none"})
    assert not requested({"OTEL_TRACES_EXPORTER": " "})
    assert requested({"OTEL_TRACES_EXPORTER": "otlp"})
    assert requested({"OTEL_TRACES_EXPORTER": "none,console"})
    assert not requested({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "TRUE"})
    assert requested({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "false"})
    # Only the exporter turns tracing on: an endpoint alone does not.
    assert not requested({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})


def test_importing_the_gateway_loads_no_opentelemetry() -> None:
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_ONLY],
        cwd=ROOT,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "[]"


def test_console_exporter_prints_the_call_span_with_the_service_name() -> None:
    summary, out, _ = _probe(OTEL_TRACES_EXPORTER="console")
    assert summary["on"]
    assert '"name": "memory/recall"' in out
    assert '"service.name": "a2m-gateway"' in out
    assert "deploy keys" not in out
    _, out, _ = _probe(OTEL_TRACES_EXPORTER="console", OTEL_SERVICE_NAME="gw-otel-test")
    assert '"service.name": "gw-otel-test"' in out


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"OTEL_TRACES_EXPORTER": "none"},
        {"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"},
    ],
    ids=["unset", "none", "sdk-disabled"],
)
def test_off_means_no_span_and_no_sdk(env: dict[str, str]) -> None:
    summary, out, _ = _probe(**env)
    assert not summary["on"]
    assert not summary["sdk_loaded"]
    assert not summary["tracing_loaded"]
    assert '"name"' not in out


def test_the_sdk_reads_the_sampler_variable() -> None:
    summary, out, _ = _probe(OTEL_TRACES_EXPORTER="console", OTEL_TRACES_SAMPLER="always_off")
    assert summary["on"]
    assert '"name": "memory/recall"' not in out


def test_an_unknown_exporter_is_logged_and_the_gateway_serves_untraced() -> None:
    summary, out, err = _probe(OTEL_TRACES_EXPORTER="zebra")
    assert not summary["on"]
    assert "no installed exporter is named 'zebra'" in err
    assert '"name"' not in out


def test_otlp_sends_the_spans_to_the_configured_endpoint() -> None:
    with otlp_collector() as (url, got):
        summary, _, _ = _probe(OTEL_TRACES_EXPORTER="otlp", OTEL_EXPORTER_OTLP_ENDPOINT=url)
    assert summary["on"]
    names = span_names(got)
    assert names == ["memory/recall"]
