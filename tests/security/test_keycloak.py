"""Keycloak-issued tokens on the A2M door: the gateway verifies what a real IdP issues.

The identity provider is the Keycloak of ``tests/engines/engines.py`` (see
``tests/support/keycloak.py`` for its realm). The gateway fetches the realm's JWKS
over a real socket; the store is the in-memory engine where the test is about
authentication, and the colliding-ids alias on a real Elasticsearch index where it
is about which documents a group sees.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jwt
import pytest

from gateway.runtime import Gateway
from tests.security.acl_corpus import ALIAS, SECRET, collision_store, load_collisions
from tests.security.support import (
    MemoryConnector,
    asgi_client,
    bearer,
    build_gateway,
    memory_store_config,
    rpc,
)
from tests.support.keycloak import (
    OTHER_REALM,
    REALM,
    Keycloak,
    add_rsa_key,
    remove_component,
    rsa_signing_providers,
)

pytestmark = pytest.mark.integration

TENANT_SCOPE = {
    "filters": [{"field": "tenant", "claims": [{"claim": "groups", "strip_prefix": "/tenants/"}]}]
}
"""Keycloak's groups claim holds full paths: /tenants/A is tenant A; /A is another group."""


def tenant_docs() -> list[tuple[str, dict[str, Any]]]:
    """Two tenants whose records share ids and keys; B's carry SECRET."""
    docs = []
    for n, tenant in enumerate(["A", "B", "A", "B"]):
        doc_id = f"r{n // 2 + 1}"
        body = f"quarterly figures {doc_id} of tenant {tenant}"
        if tenant == "B":
            body += f" {SECRET}"
        ts = f"2026-01-0{n + 1}T00:00:00Z"
        docs.append((doc_id, {"body": body, "k": f"k/{doc_id}", "ts": ts, "tenant": tenant}))
    return docs


@pytest.fixture(scope="module")
def keycloak(keycloak_url: str) -> Keycloak:
    return Keycloak(keycloak_url)


class Door:
    """An in-process gateway over the in-memory engine, verifying one realm's tokens."""

    def __init__(self, keycloak: Keycloak, realm: str = REALM, **jwt_settings: Any) -> None:
        self.engine = MemoryConnector(tenant_docs())
        self.gateway: Gateway = build_gateway(
            {"auth": {"jwt": keycloak.jwt_config(realm, **jwt_settings)}},
            {"docs": memory_store_config(scope=TENANT_SCOPE, owner=False)},
            {"docs": self.engine},
        )
        self.client = asgi_client(self.gateway)

    async def post(self, token: str, method: str = "memory/recall", **params: Any) -> Any:
        body = rpc(method, params or {"query": "quarterly figures"})
        return await self.client.post(
            "/a2m/docs",
            content=json.dumps(body),
            headers={"content-type": "application/json", **bearer(token)},
        )

    async def close(self) -> None:
        await self.client.aclose()
        await self.gateway.close()


@pytest.fixture
async def door(keycloak: Keycloak) -> AsyncIterator[Door]:
    d = Door(keycloak, leeway_s=0)
    yield d
    await d.close()


def contents(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    answer = response.json()
    assert "result" in answer, answer
    return [r["content"] for r in answer["result"]["records"]]


def assert_401(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


def claims_of(token: str) -> dict[str, Any]:
    """What Keycloak put in a token (read without verifying: the gateway does that)."""
    out: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
    return out


async def test_client_credentials_tokens_see_their_own_tenant(
    keycloak: Keycloak, door: Door
) -> None:
    a = await keycloak.client_credentials("a2m-service")
    b = await keycloak.client_credentials("a2m-service-b")
    # The shape a real IdP issues: path-valued groups, azp the client, aud from the mapper.
    assert claims_of(a)["groups"] == ["/tenants/A"]
    assert sorted(claims_of(b)["groups"]) == ["/A", "/tenants/B"]
    assert claims_of(a)["azp"] == "a2m-service"
    seen_a, seen_b = contents(await door.post(a)), contents(await door.post(b))
    assert seen_a
    assert seen_b
    assert all("tenant A" in c for c in seen_a), seen_a
    assert all("tenant B" in c for c in seen_b), seen_b
    assert not set(seen_a) & set(seen_b)
    # The top-level group /A is not tenant A: B's service is scoped to B alone.
    assert {c.field: c.values for c in door.engine.conditions()[-1]} == {"tenant": ("B",)}
    fetched = await door.post(a, "memory/fetch", key="k/r1")
    assert "tenant A" in fetched.json()["result"]["record"]["content"]


async def test_a_token_of_another_realm_is_refused(keycloak: Keycloak, door: Door) -> None:
    # Same client id, secret, groups and audience: only the issuer (and the keys) differ.
    foreign = await keycloak.client_credentials("a2m-service", OTHER_REALM)
    assert claims_of(foreign)["iss"] == keycloak.issuer(OTHER_REALM)
    assert_401(await door.post(foreign))
    assert door.engine.calls == 0
    assert contents(await door.post(await keycloak.client_credentials("a2m-service")))


async def test_the_issuer_is_checked_even_with_the_right_keys(keycloak: Keycloak) -> None:
    # A gateway trusting the other realm's JWKS but this realm's issuer: the signature
    # verifies for other-realm tokens, and the issuer check alone refuses them.
    d = Door(keycloak, jwks_url=keycloak.jwks_url(OTHER_REALM))
    try:
        assert_401(await d.post(await keycloak.client_credentials("a2m-service", OTHER_REALM)))
        assert d.engine.calls == 0
    finally:
        await d.close()


async def test_a_token_without_the_gateway_audience_is_refused(
    keycloak: Keycloak, door: Door
) -> None:
    token = await keycloak.client_credentials("a2m-elsewhere")
    assert "a2m-gateway" not in (claims_of(token).get("aud") or [])
    assert_401(await door.post(token))
    assert door.engine.calls == 0


async def test_authorized_parties_keep_other_clients_of_the_realm_out(
    keycloak: Keycloak,
) -> None:
    # Both services' tokens name the gateway's audience; only one client is let in.
    d = Door(keycloak, authorized_parties=["a2m-service"])
    try:
        assert contents(await d.post(await keycloak.client_credentials("a2m-service")))
        other = await keycloak.client_credentials("a2m-service-b")
        assert "a2m-gateway" in claims_of(other)["aud"]
        assert_401(await d.post(other))
    finally:
        await d.close()


async def test_an_expired_token_is_refused(keycloak: Keycloak, door: Door) -> None:
    # The JWKS is fetched first, so the short-lived token is checked at once.
    assert contents(await door.post(await keycloak.client_credentials("a2m-service")))
    token = await keycloak.client_credentials("a2m-short")
    exp = claims_of(token)["exp"]
    assert exp - claims_of(token)["iat"] <= 10  # the client's token lifespan
    assert contents(await door.post(token))  # valid until it expires
    await asyncio.sleep(max(0.0, exp + 1 - time.time()))
    assert_401(await door.post(token))


async def wait_for_status(door: Door, token: str, status: int, within_s: float) -> float:
    """Seconds until a call with `token` answers `status`; fails after `within_s`."""
    t0 = time.monotonic()
    while True:
        r = await door.post(token)
        if r.status_code == status:
            return time.monotonic() - t0
        assert time.monotonic() - t0 < within_s, (status, r.status_code, r.text)
        await asyncio.sleep(0.25)


async def test_rotating_the_realm_signing_key_while_the_gateway_runs(keycloak: Keycloak) -> None:
    # In the other realm, so no other test's gateway sees its keys change.
    cache_s, cooldown_s = 6.0, 2.0
    d = Door(keycloak, OTHER_REALM, jwks_cache_s=cache_s, jwks_cooldown_s=cooldown_s)
    admin = await keycloak.admin()
    try:
        old = await keycloak.client_credentials("a2m-service", OTHER_REALM)
        assert contents(await d.post(old))
        before = await rsa_signing_providers(admin, OTHER_REALM)
        priority = max(int(p["config"]["priority"][0]) for p in before) + 100
        await add_rsa_key(admin, OTHER_REALM, f"rotated-{time.time_ns()}", priority)
        new = await keycloak.client_credentials("a2m-service", OTHER_REALM)
        kid_old, kid_new = (jwt.get_unverified_header(t)["kid"] for t in (old, new))
        assert kid_new != kid_old
        # An unknown kid refetches the JWKS, at most once per cooldown.
        # (The slack is the fetch itself, on a busy host.)
        assert await wait_for_status(d, new, 200, within_s=cooldown_s + 10) <= cooldown_s + 5
        assert contents(await d.post(old))  # both keys are published: both verify
        for provider in before:
            await remove_component(admin, OTHER_REALM, provider["id"])
        # The cached set still holds the old key until it expires; then the old token fails.
        waited = await wait_for_status(d, old, 401, within_s=cache_s + cooldown_s + 10)
        assert waited <= cache_s + cooldown_s + 5
        assert contents(await d.post(new))
    finally:
        await admin.aclose()
        await d.close()


# -- groups becoming scopes on a real engine, over colliding ids -----------------------------------

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("memory/recall", {"query": "alpha quarterly"}),
    ("memory/recall", {"query": "alpha quarterly", "limit": 1}),
    ("memory/recall", {}),
    ("memory/recall", {"query": "alpha", "key_prefix": "k/r"}),
    ("memory/timeline", {}),
    ("memory/fetch", {"key": "k/r1"}),
]


@pytest.mark.elasticsearch
async def test_keycloak_groups_scope_colliding_ids_on_a_real_engine(
    keycloak: Keycloak, elasticsearch_url: str
) -> None:
    await asyncio.to_thread(load_collisions, "elasticsearch", elasticsearch_url)
    store = {**collision_store("elasticsearch", elasticsearch_url, ALIAS), "scope": TENANT_SCOPE}
    gateway = build_gateway({"auth": {"jwt": keycloak.jwt_config()}}, {"scifact": store}, {})
    await gateway.start()
    a = bearer(await keycloak.client_credentials("a2m-service"))
    b = bearer(await keycloak.client_credentials("a2m-service-b"))
    try:
        async with asgi_client(gateway) as client:

            async def call(headers: dict[str, str], method: str, params: Any) -> str:
                r = await client.post(
                    "/a2m/scifact",
                    content=json.dumps(rpc(method, params)),
                    headers={"content-type": "application/json", **headers},
                )
                assert r.status_code == 200, r.text
                assert "error" not in r.json(), (method, params, r.text)
                return r.text

            for method, params in CALLS:
                seen_a, seen_b = await call(a, method, params), await call(b, method, params)
                assert SECRET not in seen_a, (method, params, seen_a)
                assert "tenant A" in seen_a, (method, params, seen_a)
                assert SECRET in seen_b, (method, params, seen_b)
                assert "tenant A" not in seen_b, (method, params, seen_b)
    finally:
        await gateway.close()
