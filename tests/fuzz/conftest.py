"""The fuzz targets' gateway: real engines behind the real HTTP app, driven in-process.

A2M_FUZZ_EXAMPLES sets the number of generated requests across the targets
(default 600, seed-fixed with ``derandomize``, which is what the normal pytest
run and CI do). A fuzz run is, for example::

    A2M_FUZZ_EXAMPLES=12000 pytest -m fuzz -p no:randomly -s

which draws fresh random examples (hypothesis prints the seed of a failure;
re-run with ``--hypothesis-seed``). The gateway serves Qdrant (qdrant-edge)
always, and Elasticsearch and OpenSearch when their URLs are set, each a
scoped SciFact store with ACLs. It runs on an event loop owned by the module,
so a synchronous hypothesis test can drive it request by request.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from gateway.runtime import Gateway
from tests.security.acl_corpus import (
    ALPHA,
    BRAVO,
    acl_subset,
    load_index,
    load_qdrant_acl,
    lucene_store,
    qdrant_store,
)
from tests.security.support import (
    BOB_KEY,
    CAROL_KEY,
    Issuer,
    asgi_client,
    auth_section,
    build_gateway,
)
from tests.support.scifact import SciFact, load_scifact

# Hypothesis reports a failing example by importing libcst, which warns on import (a
# DeprecationWarning from mypy_extensions); with warnings as errors that import would turn
# a fuzz finding into a pytest INTERNALERROR. Import it once here, quietly.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    with contextlib.suppress(ImportError):
        import hypothesis.extra._patching  # noqa: F401

DEFAULT_EXAMPLES = 600
CREDENTIAL_SLOTS = ["cred-0", "cred-1", "cred-2", "cred-3", "cred-4"]
"""Strategies are built at import, before the tokens exist: they draw these placeholders."""
STORE_SLOTS = ["store-0", "store-1", "store-2"]
REQUEST_TIMEOUT_S = 30.0
"""One request taking longer than this is a hang."""


def budget() -> int:
    return int(os.environ.get("A2M_FUZZ_EXAMPLES", DEFAULT_EXAMPLES))


def fuzz_run() -> bool:
    """A long, freshly random run (A2M_FUZZ_EXAMPLES set), not CI's seed-fixed one."""
    return "A2M_FUZZ_EXAMPLES" in os.environ


@dataclass
class Tally:
    """What the targets sent and got back, for the closing summary."""

    requests: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    codes: Counter[int] = field(default_factory=Counter)
    started: float = field(default_factory=time.monotonic)
    slowest_s: float = 0.0


@dataclass
class FuzzGateway:
    loop: asyncio.AbstractEventLoop
    gateway: Gateway
    client: httpx.AsyncClient
    stores: list[str]
    sf: SciFact
    credentials: dict[str, str]
    """credential -> principal name (alice, bob, carol, dave)."""
    groups: dict[str, list[str]]
    tally: Tally = field(default_factory=Tally)

    def real_headers(self, headers: dict[str, str]) -> dict[str, str]:
        """Headers drawn with CREDENTIAL_SLOTS placeholders, with the real credentials in."""
        out = dict(headers)
        auth = out.get("authorization", "")
        creds = list(self.credentials)
        for i, slot in enumerate(CREDENTIAL_SLOTS):
            if auth == f"Bearer {slot}":
                out["authorization"] = f"Bearer {creds[i % len(creds)]}"
        return out

    def store_name(self, slot: str) -> str:
        """A STORE_SLOTS placeholder as one of the stores actually served."""
        return (
            self.stores[STORE_SLOTS.index(slot) % len(self.stores)] if slot in STORE_SLOTS else slot
        )

    def run(self, coro: object) -> object:
        return self.loop.run_until_complete(asyncio.wait_for(coro, REQUEST_TIMEOUT_S))  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def fuzz_gateway(
    scifact_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FuzzGateway]:
    issuer = Issuer.create(tmp_path_factory.mktemp("fuzz-idp"))
    sf = load_scifact(scifact_dir)
    _, doc_ids = acl_subset(sf)
    path = tmp_path_factory.mktemp("fuzz-qdrant")
    load_qdrant_acl(path, sf, doc_ids)
    stores = {"q": qdrant_store(path)}
    for engine, var in (
        ("elasticsearch", "A2M_TEST_ELASTICSEARCH_URL"),
        ("opensearch", "A2M_TEST_OPENSEARCH_URL"),
    ):
        url = os.environ.get(var)
        if url:
            index = load_index(engine, url, sf, doc_ids)  # type: ignore[arg-type]
            stores[engine[:2]] = lucene_store(engine, url, index)
    # A generous rate limit: the code path runs on every call without refusing the fuzzer.
    server = {
        "auth": auth_section(issuer, [BRAVO]),
        "rate_limit": {"requests_per_second": 1e6, "burst": 1_000_000},
        "max_body_bytes": 65536,
    }
    loop = asyncio.new_event_loop()
    gateway = build_gateway(server, stores, {})
    loop.run_until_complete(gateway.start())
    client = asgi_client(gateway)
    credentials = {
        issuer.token("alice", groups=[ALPHA], exp_in=86_400): "alice",
        issuer.token("erin", alg="ES256", kid="ec-1", groups=[ALPHA, BRAVO], exp_in=86_400): "erin",
        BOB_KEY: "bob",
        CAROL_KEY: "carol",
        issuer.token("dave", exp_in=-3600): "dave",  # expired: 401
    }
    groups = {"alice": [ALPHA], "erin": [ALPHA, BRAVO], "bob": [BRAVO], "carol": []}
    fg = FuzzGateway(loop, gateway, client, list(stores), sf, credentials, groups)
    try:
        yield fg
    finally:
        loop.run_until_complete(client.aclose())
        loop.run_until_complete(gateway.close())
        loop.close()
