"""A real Keycloak for the auth tests: tokens, the browser's login step, the admin API.

The server is the ``keycloak`` part of ``tests/engines/engines.py`` (found through
``A2M_TEST_KEYCLOAK_URL``), with ``tests/engines/keycloak-realm.json`` imported as
realm ``a2m`` and, the same clients and users under another issuer, ``a2m-other``:

- ``a2m-service`` (group ``/tenants/A``) and ``a2m-service-b`` (``/tenants/B`` and a
  top-level ``/A``): confidential clients for the client-credentials grant, their
  tokens naming the audience ``a2m-gateway``;
- ``a2m-short``: the same, but its tokens live ten seconds; ``a2m-elsewhere``: tokens
  without the gateway's audience;
- ``a2m-mcp``: the public client MCP clients log in with (authorization code + PKCE
  S256, any loopback redirect URI); users ``alice`` (``/tenants/A``) and ``bob``
  (``/tenants/B`` and ``/A``).

The browser step of the authorization code flow is done with httpx: the login page's
form is posted with the user's password and the redirect to the client is read, not
followed (nothing listens on the redirect URI).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx

REALM = "a2m"
OTHER_REALM = "a2m-other"
AUDIENCE = "a2m-gateway"
SECRETS = {
    "a2m-service": "a2m-service-secret",
    "a2m-service-b": "a2m-service-b-secret",
    "a2m-short": "a2m-short-secret",
    "a2m-elsewhere": "a2m-elsewhere-secret",
}
PASSWORDS = {"alice": "alice-password", "bob": "bob-password"}
MCP_CLIENT = "a2m-mcp"
ADMIN = ("admin", "admin")
"""The dev-mode bootstrap admin engines.py creates (loopback only)."""
KEY_PROVIDER = "org.keycloak.keys.KeyProvider"
_FORM = re.compile(r'<form[^>]*id="kc-form-login"[^>]*action="([^"]+)"', re.S)
TIMEOUT_S = 30.0


class LoginError(AssertionError):
    """Keycloak did not redirect to the client after the login form."""


@dataclass(frozen=True)
class Keycloak:
    url: str

    def issuer(self, realm: str = REALM) -> str:
        return f"{self.url}/realms/{realm}"

    def jwks_url(self, realm: str = REALM) -> str:
        return f"{self.issuer(realm)}/protocol/openid-connect/certs"

    def token_url(self, realm: str = REALM) -> str:
        return f"{self.issuer(realm)}/protocol/openid-connect/token"

    def jwt_config(self, realm: str = REALM, **overrides: Any) -> dict[str, Any]:
        """``server.auth.jwt`` for tokens of `realm`."""
        return {
            "issuer": self.issuer(realm),
            "audience": [AUDIENCE],
            "algorithms": ["RS256"],
            "jwks_url": self.jwks_url(realm),
            **overrides,
        }

    async def client_credentials(self, client_id: str, realm: str = REALM) -> str:
        """An access token of the client-credentials grant (a service calling the gateway)."""
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as http:
            r = await http.post(
                self.token_url(realm),
                data={"grant_type": "client_credentials"},
                auth=(client_id, SECRETS[client_id]),
            )
        assert r.status_code == 200, r.text
        token: str = r.json()["access_token"]
        return token

    async def admin(self) -> httpx.AsyncClient:
        """An HTTP client on the admin REST API, logged in as the bootstrap admin."""
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as http:
            r = await http.post(
                f"{self.url}/realms/master/protocol/openid-connect/token",
                data={
                    "grant_type": "password",
                    "client_id": "admin-cli",
                    "username": ADMIN[0],
                    "password": ADMIN[1],
                },
            )
        assert r.status_code == 200, r.text
        return httpx.AsyncClient(
            base_url=f"{self.url}/admin/realms/",
            headers={"authorization": f"Bearer {r.json()['access_token']}"},
            timeout=TIMEOUT_S,
        )


async def login(authorization_url: str, username: str) -> dict[str, str]:
    """The browser's part: open the authorization URL, post the login form, read the redirect.

    Returns the query of the redirect to the client (``code``, ``state``, ``iss``).
    """
    async with httpx.AsyncClient(timeout=TIMEOUT_S, follow_redirects=False) as browser:
        page = await browser.get(authorization_url)
        assert page.status_code == 200, page.text[:500]
        found = _FORM.search(page.text)
        if found is None:
            raise LoginError(f"no login form at {authorization_url}: {page.text[:300]}")
        action = urljoin(str(page.url), html.unescape(found.group(1)))
        # Keycloak's session cookies are `Secure`; browsers send them to http://127.0.0.1 (a
        # secure context), httpx does not: they are sent by hand.
        cookies = "; ".join(f"{name}={value}" for name, value in browser.cookies.items())
        r = await browser.post(
            action,
            data={"username": username, "password": PASSWORDS[username], "credentialId": ""},
            headers={"cookie": cookies},
        )
    if r.status_code != 302:
        raise LoginError(f"login of {username}: HTTP {r.status_code} {r.text[:300]}")
    query = parse_qs(urlsplit(r.headers["location"]).query)
    return {k: v[0] for k, v in query.items()}


async def client_uuid(admin: httpx.AsyncClient, realm: str, client_id: str) -> str:
    r = await admin.get(f"{realm}/clients", params={"clientId": client_id})
    r.raise_for_status()
    (client,) = r.json()
    uuid: str = client["id"]
    return uuid


async def add_audience(admin: httpx.AsyncClient, realm: str, client_id: str, audience: str) -> str:
    """An audience mapper on `client_id` naming `audience`; returns its id (to delete it)."""
    uuid = await client_uuid(admin, realm, client_id)
    r = await admin.post(
        f"{realm}/clients/{uuid}/protocol-mappers/models",
        json={
            "name": f"audience {audience}",
            "protocol": "openid-connect",
            "protocolMapper": "oidc-audience-mapper",
            "config": {
                "included.custom.audience": audience,
                "access.token.claim": "true",
                "id.token.claim": "false",
            },
        },
    )
    assert r.status_code == 201, r.text
    return r.headers["location"].rsplit("/", 1)[-1]


async def remove_mapper(admin: httpx.AsyncClient, realm: str, client_id: str, mapper: str) -> None:
    uuid = await client_uuid(admin, realm, client_id)
    r = await admin.delete(f"{realm}/clients/{uuid}/protocol-mappers/models/{mapper}")
    assert r.status_code == 204, r.text


async def rsa_signing_providers(admin: httpx.AsyncClient, realm: str) -> list[dict[str, Any]]:
    """The realm's RS256 signing-key providers (not the RSA-OAEP encryption one)."""
    r = await admin.get(f"{realm}/components", params={"type": KEY_PROVIDER})
    r.raise_for_status()
    return [
        c
        for c in r.json()
        if c["providerId"] in ("rsa-generated", "rsa")
        and c.get("config", {}).get("algorithm", ["RS256"]) == ["RS256"]
    ]


async def add_rsa_key(admin: httpx.AsyncClient, realm: str, name: str, priority: int) -> str:
    """A new generated RS256 key provider; the highest priority signs new tokens."""
    r = await admin.get(realm)
    r.raise_for_status()
    r = await admin.post(
        f"{realm}/components",
        json={
            "name": name,
            "providerId": "rsa-generated",
            "providerType": KEY_PROVIDER,
            "parentId": r.json()["id"],
            "config": {
                "priority": [str(priority)],
                "enabled": ["true"],
                "active": ["true"],
                "keySize": ["2048"],
                "algorithm": ["RS256"],
            },
        },
    )
    assert r.status_code == 201, r.text
    return r.headers["location"].rsplit("/", 1)[-1]


async def remove_component(admin: httpx.AsyncClient, realm: str, component: str) -> None:
    r = await admin.delete(f"{realm}/components/{component}")
    assert r.status_code == 204, r.text
