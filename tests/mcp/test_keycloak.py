"""An MCP client logging in against Keycloak, as Claude Code or VS Code would.

A real ``a2m-gateway serve`` verifies tokens of the ``a2m`` realm
(tests/support/keycloak.py) and serves a Qdrant collection whose points of two
tenants share an id and a key, scoped by the Keycloak group under ``/tenants/``.
The official MCP SDK's OAuth client (``OAuthClientProvider``) gets the 401,
follows its ``resource_metadata`` to the RFC 9728 document, from there to
Keycloak's metadata, and runs the authorization code flow with PKCE for the
public client ``a2m-mcp``, naming the RFC 8707 ``resource``; the browser step
posts Keycloak's login form. Keycloak 26.4 does not act on ``resource``: an
audience mapper puts the MCP URL in ``aud``, and the gateway's audience check
requires it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx
import httpx2
import jwt
import pytest
import yaml
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from tests.conformance.conftest import CALL_TIMEOUT_S, HttpServer, free_port, start_http_server
from tests.mcp.support import structured, tools_by_name
from tests.security.acl_corpus import SECRET, load_qdrant_collisions, qdrant_collision_store
from tests.support.keycloak import (
    AUDIENCE,
    MCP_CLIENT,
    REALM,
    Keycloak,
    add_audience,
    login,
    remove_mapper,
)

pytestmark = pytest.mark.integration

TENANT_SCOPE = {
    "filters": [{"field": "tenant", "claims": [{"claim": "groups", "strip_prefix": "/tenants/"}]}]
}
REDIRECT = "http://127.0.0.1:33418/callback"
"""Nothing listens here: the login's redirect is read, not followed."""


@dataclass
class Served:
    server: HttpServer
    resource: str
    keycloak: Keycloak


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, keycloak_url: str) -> Iterator[Served]:
    keycloak = Keycloak(keycloak_url)
    qdrant = tmp_path_factory.mktemp("mcp-keycloak-qdrant")
    load_qdrant_collisions(qdrant)
    # Opening an in-process store on a busy CI host can take longer than the default deadline.
    store = {**qdrant_collision_store(qdrant), "scope": TENANT_SCOPE, "request_timeout_ms": 60_000}
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    jwt_cfg = keycloak.jwt_config(audience=[AUDIENCE, resource])
    doc = {
        "server": {
            "auth": {"jwt": jwt_cfg},
            "mcp": {"resource": resource, "audience_check": True, "scopes_supported": ["openid"]},
        },
        "stores": {"tenants": store},
    }
    root = tmp_path_factory.mktemp("mcp-keycloak")
    config = root / "gateway.yaml"
    config.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    server = start_http_server(root / "data", config, port=port)
    yield Served(server, resource, keycloak)
    server.stop()


@pytest.fixture(scope="module")
async def mcp_audience(served: Served) -> AsyncIterator[None]:
    """The audience mapper a deployment adds to the MCP client: the gateway's MCP URL."""
    admin = await served.keycloak.admin()
    mapper = await add_audience(admin, REALM, MCP_CLIENT, served.resource)
    try:
        yield
    finally:
        await remove_mapper(admin, REALM, MCP_CLIENT, mapper)
        await admin.aclose()


@dataclass
class Storage:
    """The SDK's token storage, holding the pre-registered public client (no DCR)."""

    tokens: OAuthToken | None = None
    client: OAuthClientInformationFull = field(
        default_factory=lambda: OAuthClientInformationFull(
            client_id=MCP_CLIENT,
            redirect_uris=[REDIRECT],
            token_endpoint_auth_method="none",
            grant_types=["authorization_code"],
        )
    )

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@dataclass
class Browser:
    """The user's browser: logs `username` in at whatever URL the SDK opens."""

    username: str
    opened: list[str] = field(default_factory=list)
    redirect: dict[str, str] = field(default_factory=dict)

    async def open(self, url: str) -> None:
        self.opened.append(url)
        self.redirect = await login(url, self.username)

    async def callback(self) -> AuthorizationCodeResult:
        r = self.redirect
        return AuthorizationCodeResult(code=r["code"], state=r.get("state"), iss=r.get("iss"))


@dataclass
class Session:
    client: Client
    browser: Browser
    storage: Storage
    requests: list[str]


@asynccontextmanager
async def logged_in(served: Served, username: str, mode: str) -> AsyncIterator[Session]:
    storage, browser = Storage(), Browser(username)
    provider = OAuthClientProvider(
        server_url=served.resource,
        client_metadata=OAuthClientMetadata(
            redirect_uris=[REDIRECT],
            token_endpoint_auth_method="none",
            grant_types=["authorization_code"],
            client_name="a2m-gateway tests",
        ),
        storage=storage,
        redirect_handler=browser.open,
        callback_handler=browser.callback,
    )
    requests: list[str] = []

    async def record(request: httpx2.Request) -> None:
        requests.append(f"{request.method} {request.url}")

    async with httpx2.AsyncClient(
        auth=provider, timeout=CALL_TIMEOUT_S, event_hooks={"request": [record]}
    ) as http:
        transport = streamable_http_client(served.resource, http_client=http)
        async with Client(transport, mode=mode, read_timeout_seconds=CALL_TIMEOUT_S) as client:
            yield Session(client, browser, storage, requests)


async def search_text(session: Session, query: str) -> str:
    tools = tools_by_name((await session.client.list_tools()).tools)
    result = await session.client.call_tool("search", {"query": query, "limit": 10})
    return json.dumps(structured(result, tools["search"]))


@pytest.mark.usefixtures("mcp_audience")
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_sdk_logs_in_with_pkce_and_each_user_sees_their_tenant(
    served: Served, mode: str
) -> None:
    seen: dict[str, str] = {}
    for user in ("alice", "bob"):
        async with logged_in(served, user, mode) as session:
            seen[user] = await search_text(session, "alpha quarterly figures")
            assert session.storage.tokens is not None
            claims = jwt.decode(
                session.storage.tokens.access_token, options={"verify_signature": False}
            )
            auth_url = session.browser.opened[0]
            requests = session.requests
            refresh = session.storage.tokens.refresh_token
    # alice (/tenants/A) sees A's copies; bob (/tenants/B and /A) sees B's and never A's.
    assert "tenant A" in seen["alice"]
    assert SECRET not in seen["alice"]
    assert SECRET in seen["bob"]
    assert "tenant A" not in seen["bob"]
    # The path the SDK took: 401, the RFC 9728 document, Keycloak's metadata, its token endpoint.
    prm = served.resource.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    issuer = served.keycloak.issuer()
    assert f"GET {prm}" in requests
    assert f"POST {issuer}/protocol/openid-connect/token" in requests
    assert auth_url.startswith(f"{issuer}/protocol/openid-connect/auth?")
    assert "code_challenge_method=S256" in auth_url
    # RFC 8707: the SDK names the resource; Keycloak's audience mapper is what puts it in aud.
    assert httpx.URL(auth_url).params["resource"] == served.resource
    assert claims["iss"] == issuer
    assert claims["azp"] == MCP_CLIENT
    assert served.resource in claims["aud"]
    # Keycloak's refresh token is a JWT too (HS512, realm secret): never a credential here.
    assert refresh is not None
    assert jwt.get_unverified_header(refresh)["alg"].startswith("HS")
    async with httpx.AsyncClient(timeout=CALL_TIMEOUT_S) as http:
        r = await http.post(
            served.resource, json={}, headers={"authorization": f"Bearer {refresh}"}
        )
    assert r.status_code == 401


async def test_a_keycloak_token_without_the_mcp_audience_is_refused_on_mcp(
    served: Served,
) -> None:
    # A service token names the gateway's A2M audience, not the MCP resource.
    token = await served.keycloak.client_credentials("a2m-service")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {
        "authorization": f"Bearer {token}",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
    }
    async with httpx.AsyncClient(timeout=CALL_TIMEOUT_S) as http:
        r = await http.post(served.resource, json=body, headers=headers)
        assert r.status_code == 401, r.text
        challenge = r.headers["www-authenticate"]
        assert 'resource_metadata="' in challenge
        prm = await http.get(challenge.split('resource_metadata="', 1)[1].split('"', 1)[0])
    assert prm.json()["authorization_servers"] == [served.keycloak.issuer()]
    assert prm.json()["resource"] == served.resource
    assert prm.json()["scopes_supported"] == ["openid"]
