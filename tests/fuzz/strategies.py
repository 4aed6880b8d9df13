"""Hypothesis strategies for the JSON-RPC surface: messages, params, headers, raw bytes.

Valid-looking requests dominate (a fuzzer that only sends garbage never gets
past the parser), but every part can be wrong: the envelope, the method, the
type and size of each param, the nesting, the number encoding, the headers.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

from gateway.a2m.methods import METHOD_CAPABILITY

# The common case first: hypothesis's simplest draw is index 0 (and integer 0), so rare
# branches below fire on a mid-range value instead.
METHODS = [
    "memory/recall",
    "memory/timeline",
    "memory/fetch",
    "memory/describe",
    *(m for m in METHOD_CAPABILITY if m not in ("memory/recall", "memory/timeline")),
    "memory/bogus",
    "tools/list",
    "memory/",
    "",
    "rpc.discover",
]
RARE = 13
"""A draw of st.integers(0, 19) equal to this takes the rare branch (5 %)."""
DIMENSIONS = 384

# Strings that mean something to some layer: query syntaxes, JSON, paths, control characters.
NASTY = [
    "",
    " ",
    "*",
    "?",
    "\\",
    '"',
    "'",
    "title:foo AND NOT bar",
    "foo~2 bar^10",
    '{"query":{"match_all":{}}}',
    "$where",
    "../../etc/passwd",
    "\x00",
    "\u2028",
    "\ud7ff\ue000",
    "a" * 5000,
    "scifact/",
    "scifact/1",
    "grp-alpha-7q",
    "grp-bravo-3z",
    "alice",
    "bob",
    "1e309",
    "NaN",
]

text = st.one_of(st.text(max_size=40), st.sampled_from(NASTY))
ints = st.one_of(
    st.integers(min_value=-5, max_value=120),
    st.integers(),
    st.sampled_from([0, -1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63) - 1]),
)
floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1e-320, 1e308, -1e308, 0.5, 1.0]),
)
scalars = st.one_of(st.none(), st.booleans(), ints, floats, text)
json_values: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(text, children, max_size=5)
    ),
    max_leaves=15,
)

WHERE_KEYS = [
    "id",
    "key",
    "group",
    "role",
    "uri",
    "media_type",
    "content",
    "created_at",
    "updated_at",
    "score",
    "embedding",
    "owner",
    "title",
    "year",
    "acl",
    "metadata",
]


@st.composite
def timestamps(draw: st.DrawFn) -> str:
    """RFC 3339-ish strings across the whole datetime range, any offset, any precision."""
    when = draw(st.datetimes(min_value=datetime.min, max_value=datetime.max))
    offset = draw(
        st.timedeltas(
            min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23, minutes=59)
        )
    )
    aware = when.replace(tzinfo=timezone(timedelta(minutes=offset // timedelta(minutes=1))))
    text = aware.isoformat(
        timespec=draw(st.sampled_from(["seconds", "milliseconds", "microseconds"]))
    )
    return text.replace("+00:00", "Z") if draw(st.booleans()) else text


where_values = st.one_of(
    timestamps(),
    st.sampled_from(["9999-12-31T23:59:59.999Z", "0001-01-01T00:00:00+01:00"]),
    scalars,
    st.lists(scalars, max_size=6),
    st.lists(
        st.sampled_from(["2024-01-01T00:00:00.000Z", "2024-01-01T00:01:00Z", "x"]), max_size=3
    ),
    json_values,
)
where = st.one_of(
    st.dictionaries(st.sampled_from(WHERE_KEYS), where_values, max_size=4),
    st.dictionaries(st.one_of(st.sampled_from(WHERE_KEYS), text), where_values, max_size=5),
    json_values,
)


@st.composite
def scaled_vectors(draw: st.DrawFn) -> list[float]:
    """A full-width vector at any magnitude, from subnormal to 1e308, or with one spike.

    Cheap to draw (a list of 384 independent floats mostly overruns hypothesis's buffer),
    and where engines differ: 32-bit range, norm overflow, zero length under cosine.
    """
    scale = 10.0 ** draw(st.integers(-324, 308))
    base = draw(st.sampled_from([0.0, 1.0, -1.0, 0.05]))
    vector = [base * scale] * DIMENSIONS
    if draw(st.booleans()):
        vector[draw(st.integers(0, DIMENSIONS - 1))] = draw(floats)
    return vector


vectors = st.one_of(
    scaled_vectors(),
    st.lists(floats, min_size=DIMENSIONS, max_size=DIMENSIONS),
    st.lists(st.floats(-1, 1), min_size=DIMENSIONS, max_size=DIMENSIONS),
    st.lists(floats, max_size=8),
    st.lists(json_values, max_size=4),
    json_values,
)
prompt = st.one_of(
    st.booleans(),
    st.fixed_dictionaries(
        {},
        optional={
            "method": st.one_of(st.sampled_from(["template", "none", "model"]), text),
            "style": st.one_of(st.sampled_from(["auto", "facts", "transcript"]), text),
            "budget": st.one_of(ints, floats),
            "cite": st.one_of(st.booleans(), json_values),
            "model": text,
        },
    ),
    json_values,
)
_known_params = st.fixed_dictionaries(
    {},
    optional={
        "query": st.one_of(text, json_values),
        "limit": st.one_of(ints, floats, json_values),
        "where": where,
        "key_prefix": st.one_of(text, json_values),
        "key": st.one_of(text, json_values),
        "owner": st.one_of(text, json_values),
        "embeddings": st.one_of(st.booleans(), json_values),
        "embedding": vectors,
        "prompt": prompt,
        "min_score": st.one_of(floats, json_values),
        "protocol": st.one_of(st.sampled_from(["a2m/0.1", "a2m/0.2", "mcp"]), json_values),
        "tier": st.one_of(text, json_values),
        "records": json_values,
        "ids": json_values,
        "session": text,
        "cursor": text,
    },
)
params_object = st.builds(
    lambda known, extra: {**extra, **known},
    _known_params,
    st.dictionaries(text, json_values, max_size=2),  # unknown params must be ignored (§2)
)
_MISSING = object()
good_ids = st.one_of(st.integers(), st.text(max_size=10))
odd_ids = st.one_of(
    text,
    st.none(),
    floats,
    st.just(_MISSING),  # a notification
    st.booleans(),
    st.lists(st.integers(), max_size=2),
)
READS = ["memory/recall", "memory/timeline", "memory/fetch", "memory/describe"]

# Well-typed params with edge values, on the fields the fuzzed stores expose: this is where
# requests get past validation into the store, the scope and the engine.
MAPPED = ["created_at", "id", "key", "group", "title", "year", "content", "owner"]
typed_values = st.one_of(
    timestamps(),
    st.sampled_from(["9999-12-31T23:59:59.999Z", "0001-01-01T00:00:00+01:00"]),
    st.text(max_size=30),
    ints,
    floats,
    st.booleans(),
    st.integers(1, 6000).map(lambda n: "9" * n),  # digit strings of any length
)
typed_where = st.dictionaries(
    st.sampled_from(MAPPED),
    st.one_of(typed_values, st.lists(typed_values, min_size=1, max_size=4)),
    min_size=1,
    max_size=3,
)
READ_PARAM_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "query": st.one_of(st.text(max_size=60), st.sampled_from(NASTY)),
    "limit": st.one_of(st.integers(1, 100), st.integers(-2, 120), ints),
    "where": typed_where,
    "key_prefix": st.one_of(st.just("scifact/"), text),
    "key": st.one_of(st.integers(1, 600000).map(lambda n: f"scifact/{n}"), st.text(max_size=30)),
    "owner": st.one_of(st.sampled_from(["alice", "bob", "erin", ""]), text),
    "embeddings": st.booleans(),
    "embedding": st.one_of(scaled_vectors(), vectors),
    "prompt": prompt,
    "min_score": st.floats(-1, 2),
}


@st.composite
def read_params(draw: st.DrawFn) -> dict[str, Any]:
    """One to three params, each mostly valid: requests that reach the engine, at its edges.

    (With every param optional and independently wrong, almost no request would get past
    validation, and the engines would never see an edge value.)
    """
    names = draw(st.lists(st.sampled_from(list(READ_PARAM_VALUES)), min_size=1, max_size=3))
    return {name: draw(READ_PARAM_VALUES[name]) for name in dict.fromkeys(names)}


@st.composite
def messages(draw: st.DrawFn) -> Any:
    """A JSON-RPC message: usually a request object, sometimes anything at all."""
    if draw(st.integers(0, 19)) == RARE:
        return draw(json_values)  # batches, scalars, nested junk
    msg: dict[str, Any] = {}
    if draw(st.integers(0, 19)) != RARE:
        msg["jsonrpc"] = "2.0" if draw(st.integers(0, 19)) != RARE else draw(json_values)
    rid = draw(odd_ids) if draw(st.integers(0, 9)) == 7 else draw(good_ids)
    if rid is not _MISSING:
        msg["id"] = rid
    if draw(st.integers(0, 19)) != RARE:
        kind = draw(st.integers(0, 19))
        if kind == RARE:
            msg["method"] = draw(json_values)
        elif kind > 15:
            msg["method"] = draw(st.sampled_from(METHODS))
        else:  # the methods this gateway serves, where the interesting code is
            msg["method"] = draw(st.sampled_from(READS))
    shape = draw(st.integers(0, 19))
    if shape < 10 and msg.get("method") in READS:
        msg["params"] = draw(read_params())
    elif shape < 16:
        msg["params"] = draw(params_object)
    elif shape == 16:
        msg["params"] = draw(st.lists(json_values, max_size=4))
    elif shape == 17:
        msg["params"] = draw(json_values)
    # else: no params at all
    return msg


def encode(message: Any, mode: int) -> bytes:
    """Serialise as a client might: compact, spaced, or with NaN/Infinity literals."""
    if mode == 0:
        return json.dumps(message, indent=2).encode()
    raw = json.dumps(message, separators=(",", ":"), allow_nan=True)
    if mode == 1:
        return raw.replace("0.5", "NaN", 1).encode()
    return raw.encode()


@st.composite
def raw_bodies(draw: st.DrawFn) -> bytes:
    """Bytes near JSON: truncated, spliced, mis-encoded, or random."""
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return draw(st.binary(max_size=300))
    base = encode(draw(messages()), draw(st.integers(0, 2)))
    if kind == 1:
        return base[: draw(st.integers(0, len(base)))]
    if kind == 2:
        at = draw(st.integers(0, len(base)))
        return base[:at] + draw(st.binary(min_size=1, max_size=8)) + base[at:]
    if kind == 3:
        return base.decode().encode("utf-16")
    if kind == 4:
        return b"[" * draw(st.integers(500, 3000)) + b"]" * draw(st.integers(0, 3000))
    return base + b"\n" + base


@st.composite
def headers(draw: st.DrawFn, credentials: list[str]) -> dict[str, str]:
    """Headers a client might send: a credential (usually a valid one), maybe an Origin."""
    out: dict[str, str] = {}
    ctype = draw(st.integers(0, 19))
    if ctype < 17:
        out["content-type"] = "application/json"
    elif ctype == 17:
        out["content-type"] = draw(
            st.sampled_from(["text/plain", "application/x-www-form-urlencoded", "x/y+json"])
        )
    cred = draw(st.integers(0, 9))
    if cred < 8:
        out["authorization"] = f"Bearer {draw(st.sampled_from(credentials))}"
    elif cred == 8:
        out["authorization"] = draw(
            st.one_of(
                st.sampled_from(["Bearer", "Basic Zm9vOmJhcg==", "Bearer a.b.c"]),
                st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=60),
            )
        )
    if draw(st.integers(0, 19)) == RARE:
        out["origin"] = draw(st.sampled_from(["https://evil.example", "null", "http://localhost"]))
    if draw(st.integers(0, 19)) == RARE:
        out["a2m-protocol-version"] = draw(st.sampled_from(["a2m/0.1", "a2m/0.2", "", "x" * 50]))
    return out
