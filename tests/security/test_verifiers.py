"""Credential kinds as verifiers: the Authenticator asks its list, each kind answers for itself.

A kind that lives only in this file (tickets) is plugged into the list next to the
configured ones and authenticates callers over a real uvicorn socket: a new kind
needs no edit to the gateway. The configured kinds keep their order and answers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import uvicorn
import yaml
from pydantic import SecretStr

from gateway.config import parse_config
from gateway.observability.metrics import Metrics
from gateway.security.api_keys import ApiKeys, hash_api_key
from gateway.security.auth import Authenticator, verifiers_for
from gateway.security.credential import AuthenticationError, CredentialVerifier
from gateway.security.jwt_auth import JwtVerifier
from gateway.security.scopes import Principal
from gateway.transports.http import create_app
from gateway.transports.uvicorn_config import uvicorn_options
from tests.security.support import (
    BOB_KEY,
    Issuer,
    MemoryConnector,
    acl_docs,
    auth_section,
    bearer,
    build_gateway,
    memory_store_config,
    rpc,
    visible_to,
)
from tests.security.test_scopes import ForwardingConnector

SCOPE = {"filters": [{"field": "acl", "claims": ["groups"]}]}
ERIN_KEY = "a2m_erin-test-key-0123456789-abcdefghijklmnopqrstuvwx"
TICKETS = {"tkt-7f3a9c": ("dana", ["team-a"])}


class TicketVerifier:
    """A kind the gateway does not ship: opaque `tkt-` tickets an engine could check too."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def verify_token(self, token: str) -> Principal | None:
        self.asked.append(token)
        if not token.startswith("tkt-"):
            return None
        if token not in TICKETS:
            raise AuthenticationError("unknown ticket")
        subject, groups = TICKETS[token]
        claims = {"sub": subject, "groups": groups}
        return Principal(subject, claims, "ticket", credential=SecretStr(token))

    def describe(self) -> str | None:
        return f"{len(TICKETS)} ticket(s)"


@contextmanager
def audit_reasons() -> Iterator[list[str]]:
    """The `reason` of every auth_failed audit line written meanwhile."""
    reasons: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage() == "auth_failed":
                reasons.append(record.__dict__["reason"])

    audit, handler = logging.getLogger("a2m.audit"), Keep()
    saved = audit.level
    audit.addHandler(handler)
    audit.setLevel(logging.INFO)
    try:
        yield reasons
    finally:
        audit.removeHandler(handler)
        audit.setLevel(saved)


@dataclass
class Served:
    client: httpx.AsyncClient
    docs: MemoryConnector
    forwarding: ForwardingConnector
    tickets: TicketVerifier = field(default_factory=TicketVerifier)

    async def recall(self, token: str, store: str = "docs") -> httpx.Response:
        body = json.dumps(rpc("memory/recall", {"query": "deploy keys", "limit": 100}))
        headers = {**bearer(token), "content-type": "application/json"}
        return await self.client.post(f"/a2m/{store}", content=body, headers=headers)


@asynccontextmanager
async def served(issuer: Issuer) -> AsyncIterator[Served]:
    """The gateway with the configured kinds plus tickets, on a real loopback socket."""
    docs, forwarding = MemoryConnector(acl_docs()), ForwardingConnector(acl_docs())
    gateway = build_gateway(
        {"auth": auth_section(issuer)},
        {
            "docs": memory_store_config(scope=SCOPE),
            "fwd": memory_store_config(scope={"forward_credential": True}),
        },
        {"docs": docs, "fwd": forwarding},
    )
    cfg = gateway.config.server
    tickets = TicketVerifier()
    auth = Authenticator(cfg.auth, [*verifiers_for(cfg.auth), tickets])
    app = create_app(gateway, cfg, Metrics(), authenticator=auth, bind_host="127.0.0.1")
    options = uvicorn_options(cfg)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, **options)
    server = uvicorn.Server(config)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        async with httpx.AsyncClient(base_url=url, timeout=20) as client:
            yield Served(client, docs, forwarding, tickets)
    finally:
        server.should_exit = True
        await task
        sock.close()
        await gateway.close()


def ids(response: httpx.Response) -> set[str]:
    assert response.status_code == 200, response.text
    return {rec["id"] for rec in response.json()["result"]["records"]}


async def test_a_kind_defined_only_here_authenticates_over_a_served_request(
    issuer: Issuer,
) -> None:
    async with served(issuer) as s:
        got = ids(await s.recall("tkt-7f3a9c"))
        assert got == {i for i, src in s.docs.docs if visible_to(["team-a"], src)}
        assert s.docs.searches[-1].filter.must[0].values == ("team-a",)
        # Its principal carries its token, so a forwarding store sends that to the engine.
        ids(await s.recall("tkt-7f3a9c", store="fwd"))
        assert s.forwarding.authorizations == ["Bearer tkt-7f3a9c"]


async def test_the_new_kind_refuses_its_own_bad_tokens_and_leaves_others_alone(
    issuer: Issuer,
) -> None:
    async with served(issuer) as s, asyncio.timeout(60):
        with audit_reasons() as reasons:
            refused = await s.recall("tkt-000000")
            unclaimed = await s.recall("nobody-knows-this-token")
        for r in (refused, unclaimed):
            assert r.status_code == 401
            assert 'error="invalid_token"' in r.headers["www-authenticate"]
        assert reasons == ["unknown ticket", "unknown credential"]
        # The configured kinds answer first, as before: the ticket verifier is not asked.
        before = len(s.tickets.asked)
        assert ids(await s.recall(BOB_KEY)) == {
            i for i, src in s.docs.docs if visible_to(["team-b"], src)
        }
        assert ids(await s.recall(issuer.token(groups=["team-b"])))
        assert len(s.tickets.asked) == before


@dataclass
class Recording:
    """A verifier that answers as told and records that it was asked."""

    answer: Principal | AuthenticationError | None
    asked: int = 0

    async def verify_token(self, token: str) -> Principal | None:
        self.asked += 1
        if isinstance(self.answer, AuthenticationError):
            raise self.answer
        return self.answer

    def describe(self) -> str | None:
        return None


def _auth(verifiers: Sequence[CredentialVerifier]) -> Authenticator:
    cfg = parse_config(
        {
            "server": {"auth": {"api_keys": [{"subject": "x", "hash": "sha256:" + "0" * 64}]}},
            "stores": {"docs": memory_store_config()},
        }
    )
    return Authenticator(cfg.server.auth, verifiers)


async def test_the_first_kind_to_claim_a_token_decides() -> None:
    alice = Principal("alice", {}, "one")
    first, second = Recording(None), Recording(alice)
    third = Recording(Principal("bob", {}, "three"))
    assert await _auth([first, second, third]).authenticate("Bearer t") is alice
    assert (first.asked, second.asked, third.asked) == (1, 1, 0)
    # Mine but bad stops the list: a later kind never gets a second opinion.
    bad, later = Recording(AuthenticationError("expired")), Recording(alice)
    with pytest.raises(AuthenticationError) as info:
        await _auth([bad, later]).authenticate("Bearer t")
    assert info.value.reason == "expired"
    assert later.asked == 0


async def test_a_token_no_kind_claims_is_the_unknown_credential_401() -> None:
    with pytest.raises(AuthenticationError) as info:
        await _auth([Recording(None)]).authenticate("Bearer t")
    assert info.value.reason == "unknown credential"
    assert info.value.presented
    with pytest.raises(AuthenticationError) as none:
        await _auth([]).authenticate("Bearer t")
    assert none.value.reason == "unknown credential"


async def test_the_configured_kinds_keep_their_order_and_answers(
    tmp_path: Path, issuer: Issuer
) -> None:
    keys = tmp_path / "keys.yaml"
    keys.write_text(yaml.safe_dump([{"subject": "erin", "hash": hash_api_key(ERIN_KEY)}]))
    section = {**auth_section(issuer), "api_keys_file": str(keys)}
    cfg = parse_config({"server": {"auth": section}, "stores": {"docs": memory_store_config()}})
    listed = verifiers_for(cfg.server.auth)
    assert [type(v).__name__ for v in listed] == ["ApiKeys", "JwtVerifier", "_KeyFileReread"]
    api_keys, jwt_kind = listed[0], listed[1]
    assert isinstance(api_keys, ApiKeys)
    assert isinstance(jwt_kind, JwtVerifier)
    token = issuer.token(groups=["team-a"])
    # Each kind says nothing about the other's tokens ...
    assert await api_keys.verify_token(token) is None
    assert await jwt_kind.verify_token(BOB_KEY) is None
    # ... and answers for its own as before.
    bob = await api_keys.verify_token(BOB_KEY)
    assert bob is not None
    assert (bob.method, bob.credential) == ("api_key", None)
    erin = await api_keys.verify_token(ERIN_KEY)
    assert erin is not None
    assert erin.subject == "erin"
    alice = await jwt_kind.verify_token(token)
    assert alice is not None
    assert alice.method == "jwt"
    assert alice.credential is not None
    assert alice.credential.get_secret_value() == token
    with pytest.raises(AuthenticationError) as info:
        await jwt_kind.verify_token("a.b.c")
    assert info.value.reason == "not a JWT"
    auth = Authenticator(cfg.server.auth)
    assert auth.describe().startswith("bearer: 3 API key(s), JWT from ")
