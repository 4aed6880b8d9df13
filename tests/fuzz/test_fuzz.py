"""Property-based fuzzing of the JSON-RPC surface, over HTTP (the ASGI app) and stdio.

Properties of every answer, whatever was sent:

- no HTTP 5xx, and only the transport statuses the gateway documents;
- no request takes longer than REQUEST_TIMEOUT_S (a hang fails the run);
- a 200 carries one JSON-RPC 2.0 response object whose error code, if any, is
  a documented one (gateway.a2m.errors.ErrorCode) and never -32603 (a bug);
- records have only A2M record fields, recall scores descend within [0, 1],
  and no record is outside the principal's scope: fuzzing doubles as a
  search for scope bypasses.

CI runs a short seed-fixed version (``derandomize``); A2M_FUZZ_EXAMPLES=N runs N
requests with fresh randomness (see conftest.py).
"""

from __future__ import annotations

import io
import json
import time
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from gateway.a2m.errors import ErrorCode
from gateway.transports.stdio import serve_stdio
from tests.fuzz.conftest import (
    CREDENTIAL_SLOTS,
    REQUEST_TIMEOUT_S,
    STORE_SLOTS,
    FuzzGateway,
    budget,
    fuzz_run,
)
from tests.fuzz.strategies import encode, headers, messages, raw_bodies
from tests.security.acl_corpus import ALPHA, BRAVO, NOBODY, visible
from tests.support.spec import RECORD_FIELDS

pytestmark = [
    pytest.mark.fuzz,
    pytest.mark.integration,
    # A failing example's repr can be megabytes (384-float vectors, long digit strings);
    # the warning about it must not replace the failure it describes.
    pytest.mark.filterwarnings(
        "ignore:Generating overly large repr:hypothesis.errors.HypothesisWarning"
    ),
]

SHARES = {"structured": 0.7, "raw": 0.15, "stdio": 0.15}
STDIO_LINES = 4
TRANSPORT_STATUSES = {200, 202, 400, 401, 403, 404, 405, 408, 413, 415, 429}
sent: dict[str, int] = {}


def examples(target: str) -> int:
    n = round(budget() * SHARES[target])
    return max(1, n // STDIO_LINES if target == "stdio" else n)


def fuzz_settings(target: str) -> settings:
    return settings(
        max_examples=examples(target),
        derandomize=not fuzz_run(),
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
    )


# -- checks ----------------------------------------------------------------------------------------


def check_response_object(obj: Any, sent_body: bytes = b"") -> None:
    """A JSON-RPC 2.0 response, never an internal error; failures quote what was sent."""
    context = f" (request: {sent_body[:500]!r})"
    assert isinstance(obj, dict), obj
    assert obj.get("jsonrpc") == "2.0", obj
    assert "id" in obj
    assert ("result" in obj) != ("error" in obj), obj
    if "error" in obj:
        err = obj["error"]
        code = err["code"]
        assert isinstance(code, int)
        assert code != ErrorCode.INTERNAL_ERROR, f"-32603 (a bug): {err['message']}{context}"
        assert isinstance(err["message"], str)


def check_records(result: Any, groups: list[str] | None, method: str | None) -> None:
    if not isinstance(result, dict):
        return
    records = list(result.get("records") or [])
    if result.get("record"):
        records.append(result["record"])
    for r in records:
        assert set(r) <= RECORD_FIELDS, set(r) - RECORD_FIELDS
        if groups is not None:
            assert visible(groups, r["id"]), f"scope bypass: {r['id']} outside {groups}"
    raw = json.dumps({k: v for k, v in result.items()})
    for acl in (ALPHA, BRAVO, NOBODY):
        assert acl not in raw, "an ACL value left the gateway"
    if method == "memory/recall" and records:
        scores = [r["score"] for r in records]
        assert all(0.0 <= s <= 1.0 for s in scores), scores
        assert scores == sorted(scores, reverse=True), scores


def tally(fg: FuzzGateway, target: str, status: int, body: Any, elapsed: float) -> None:
    sent[target] = sent.get(target, 0) + 1
    fg.tally.requests += 1
    fg.tally.statuses[status] += 1
    fg.tally.slowest_s = max(fg.tally.slowest_s, elapsed)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        fg.tally.codes[body["error"].get("code")] += 1
    elif isinstance(body, dict) and "result" in body:
        fg.tally.codes[0] += 1


async def post(fg: FuzzGateway, path: str, body: bytes, hdrs: dict[str, str]) -> httpx.Response:
    return await fg.client.post(path, content=body, headers=hdrs)


def exchange(
    fg: FuzzGateway, target: str, path: str, body: bytes, hdrs: dict[str, str], verb: str = "POST"
) -> tuple[httpx.Response, Any]:
    start = time.monotonic()
    try:
        if verb == "POST":
            r = fg.run(post(fg, path, body, hdrs))
        else:
            r = fg.run(fg.client.get(path, headers=hdrs))
    except TimeoutError:
        pytest.fail(f"hang: no answer within {REQUEST_TIMEOUT_S}s for {body[:200]!r}")
    assert isinstance(r, httpx.Response)
    elapsed = time.monotonic() - start
    assert r.status_code < 500, f"{r.status_code} for {body[:300]!r}: {r.text[:300]}"
    assert r.status_code in TRANSPORT_STATUSES, r.status_code
    parsed: Any = None
    if r.status_code == 202:
        assert r.content == b""
    elif r.content:
        parsed = orjson.loads(r.content)
    tally(fg, target, r.status_code, parsed, elapsed)
    return r, parsed


def principal_groups(fg: FuzzGateway, hdrs: dict[str, str]) -> list[str] | None:
    auth = hdrs.get("authorization", "")
    token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else None
    name = fg.credentials.get(token or "")
    return fg.groups.get(name) if name else None


# -- targets ---------------------------------------------------------------------------------------


@fuzz_settings("structured")
@given(
    message=messages(),
    encoding=st.integers(0, 4),
    hdrs=headers(CREDENTIAL_SLOTS),
    store=st.sampled_from([*STORE_SLOTS, None, "nope"]),
    verb=st.integers(0, 49),
)
def test_structured_requests(
    fuzz_gateway: FuzzGateway,
    message: Any,
    encoding: int,
    hdrs: dict[str, str],
    store: str | None,
    verb: int,
) -> None:
    fg = fuzz_gateway
    body = encode(message, encoding)
    hdrs = fg.real_headers(hdrs)
    path = "/a2m" if store is None else f"/a2m/{fg.store_name(store)}"
    http_verb = "GET" if verb == 37 else "POST"
    r, parsed = exchange(fg, "structured", path, body, hdrs, http_verb)
    if http_verb == "GET":
        assert r.status_code in (403, 405), r.status_code
        return
    if r.status_code == 200:
        check_response_object(parsed, body)
        method = message.get("method") if isinstance(message, dict) else None
        if "result" in parsed:
            check_records(parsed["result"], principal_groups(fg, hdrs), method)
    elif r.status_code == 400 and "jsonrpc" in parsed:
        # The version header (§8.3.2) is the only 400 carrying a JSON-RPC object.
        assert parsed["error"]["code"] == ErrorCode.PROTOCOL_NOT_SUPPORTED


@fuzz_settings("raw")
@given(body=raw_bodies())
def test_raw_bodies(fuzz_gateway: FuzzGateway, body: bytes) -> None:
    fg = fuzz_gateway
    token = next(iter(fg.credentials))  # alice
    hdrs = {"content-type": "application/json", "authorization": f"Bearer {token}"}
    r, parsed = exchange(fg, "raw", f"/a2m/{fg.stores[0]}", body, hdrs)
    if r.status_code == 200:
        check_response_object(parsed, body)
        if "result" in parsed:
            check_records(parsed["result"], [ALPHA], None)


@st.composite
def stdio_lines(draw: st.DrawFn) -> list[bytes]:
    """STDIO_LINES messages, about one in four of them raw bytes instead of JSON."""
    return [
        draw(raw_bodies()) if draw(st.integers(0, 3)) == 2 else encode(draw(messages()), 2)
        for _ in range(STDIO_LINES)
    ]


@fuzz_settings("stdio")
@given(lines=stdio_lines())
def test_stdio_lines(fuzz_gateway: FuzzGateway, lines: list[bytes]) -> None:
    fg = fuzz_gateway
    stdin = io.BytesIO(b"\n".join(lines) + b"\n")
    stdout = io.BytesIO()
    start = time.monotonic()
    try:
        fg.run(serve_stdio(fg.gateway.dispatcher(fg.stores[0]), stdin, stdout, max_line=65536))
    except TimeoutError:
        pytest.fail(f"stdio hang on {lines!r:.300}")
    elapsed = time.monotonic() - start
    out = stdout.getvalue()
    assert out == b"" or out.endswith(b"\n")
    answers = out.splitlines()
    # A raw line may itself hold newlines (more messages); never more answers than lines.
    assert len(answers) <= b"\n".join(lines).count(b"\n") + 1
    for line in answers:
        obj = orjson.loads(line)
        check_response_object(obj, b"\n".join(lines))
        if "result" in obj:
            check_records(obj["result"], [], None)  # stdio has no principal: nothing visible
    for _ in lines:
        tally(fg, "stdio", 0, None, elapsed / len(lines))


@pytest.mark.parametrize(
    "where",
    [
        {"created_at": "9999-12-31T23:59:59.999Z"},  # the next millisecond is past datetime.max
        {"created_at": "0001-01-01T00:00:00+01:00"},  # before year 1 once in UTC
        {"created_at": "9" * 5000},  # a digit string past int()'s 4300-digit limit
        {"created_at": ["2024-01-01T00:00:00Z", "9999-12-31T23:59:59.999+00:00"]},
        # strftime wrote year 999 as "999": every engine refused the bound. A valid
        # timestamp, so an answer (nothing was created then), not an error.
        {"created_at": "0999-01-01T00:00:00+00:00", "expect": "result"},
    ],
    ids=["max-plus-1ms", "before-year-1", "5000-digits", "in-a-list", "year-999"],
)
@pytest.mark.parametrize("method", ["memory/recall", "memory/timeline"])
def test_what_fuzzing_found_stays_fixed(
    fuzz_gateway: FuzzGateway, where: dict[str, Any], method: str
) -> None:
    """Each of these answered -32603 before its fix; now -32602 (or an answer) on every store."""
    fg = fuzz_gateway
    where = dict(where)
    expected = where.pop("expect", ErrorCode.INVALID_PARAMS)
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"where": where}})
    hdrs = {
        "content-type": "application/json",
        "authorization": f"Bearer {next(iter(fg.credentials))}",
    }
    for store in fg.stores:
        r, parsed = exchange(fg, "regressions", f"/a2m/{store}", body, hdrs)
        assert r.status_code == 200
        if expected == "result":
            assert parsed["result"]["records"] == [], parsed
        else:
            assert parsed["error"]["code"] == expected, parsed


@pytest.mark.parametrize(
    "vector",
    [
        [0.0] * 384,  # zero length: the Lucene engines refuse it under cosine
        [1e-30] * 384,  # squares underflow to 0 in 32 bits: zero length again
        [1e38] * 384,  # in float32 range, but the squared norm overflows
        [1e300] * 384,  # beyond float32
        [0.0] * 383 + [1e308],  # one spike
    ],
    ids=["zeros", "underflow", "norm-overflow", "beyond-f32", "spike"],
)
def test_vectors_engines_refuse_are_refused_first(
    fuzz_gateway: FuzzGateway, vector: list[float]
) -> None:
    """Each of these answered -32603 (an engine's 400, or a numpy overflow) on some store."""
    fg = fuzz_gateway
    for params in ({"embedding": vector}, {"embedding": vector, "query": "cancer"}):
        body = orjson.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "memory/recall", "params": params}
        )
        hdrs = {
            "content-type": "application/json",
            "authorization": f"Bearer {next(iter(fg.credentials))}",
        }
        for store in fg.stores:
            _, parsed = exchange(fg, "regressions", f"/a2m/{store}", body, hdrs)
            assert parsed["error"]["code"] == ErrorCode.INVALID_PARAMS, (store, parsed)


def test_zz_fuzz_summary(fuzz_gateway: FuzzGateway) -> None:
    """Every target that ran sent its share; the figures of the run."""
    t = fuzz_gateway.tally
    ran = [target for target in sent if target in SHARES]
    if not ran:
        pytest.skip("no fuzz target ran in this session: nothing to sum up")
    for target, n in sent.items():
        if target not in SHARES:
            continue
        wanted = examples(target) * (STDIO_LINES if target == "stdio" else 1)
        assert n >= wanted, f"{target}: {n} requests, expected {wanted}"
    elapsed = time.monotonic() - t.started
    print(
        f"\nfuzz: {t.requests} requests in {elapsed:.1f}s over stores {fuzz_gateway.stores} "
        f"({'random' if fuzz_run() else 'seed-fixed'}); slowest {t.slowest_s * 1000:.0f} ms; "
        f"HTTP statuses {dict(sorted(t.statuses.items()))}; "
        f"JSON-RPC codes {dict(sorted(t.codes.items()))}"
    )
