"""Caller authentication over HTTP (§6.1): every bad credential is a 401 before JSON-RPC.

Each refusal is checked on the wire: status 401, a `WWW-Authenticate: Bearer`
challenge, a body that is not a JSON-RPC object, and no engine call. A valid
credential gets the principal's scope and nothing more.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from gateway.config import ApiKeyEntry, AuthConfig, ConfigError, JwtConfig
from gateway.security.auth import (
    ApiKeyVerifier,
    Authenticator,
    generate_api_key,
    hash_api_key,
)
from gateway.security.credential import AuthenticationError, bearer_token
from gateway.security.jwt_auth import JwtVerifier
from tests.security.support import (
    AUDIENCE,
    BOB_KEY,
    CAROL_KEY,
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
    unsigned_token,
    visible_to,
)
from tests.support.http_peer import PeerReply, PeerRequest, StartPeer

SCOPE = {"filters": [{"field": "acl", "claims": ["groups"]}]}


@pytest.fixture
def engine() -> MemoryConnector:
    return MemoryConnector(acl_docs())


@pytest.fixture
async def client(issuer: Issuer, engine: MemoryConnector) -> AsyncIterator[httpx.AsyncClient]:
    # Heads up to 64 KiB, so a 40 KB credential reaches authentication (and is refused there).
    gateway = build_gateway(
        {"auth": auth_section(issuer), "http": {"max_header_bytes": 65_536}},
        {"docs": memory_store_config(scope=SCOPE)},
        {"docs": engine},
    )
    async with asgi_client(gateway) as c:
        yield c
    await gateway.close()


async def post(
    client: httpx.AsyncClient,
    headers: Mapping[str, str | bytes],
    body: Any = None,
    path: str = "/a2m/docs",
) -> httpx.Response:
    # As bytes, so a test can put any latin-1 value on the wire.
    sent = {b"content-type": b"application/json"}
    for name, value in headers.items():
        sent[name.encode()] = value if isinstance(value, bytes) else value.encode("latin-1")
    payload = body if body is not None else rpc("memory/recall", {"query": "deploy keys"})
    return await client.post(path, content=json.dumps(payload), headers=sent)


def assert_refused(response: httpx.Response, *, presented: bool = True) -> None:
    assert response.status_code == 401, response.text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer realm="a2m"')
    assert ('error="invalid_token"' in challenge) is presented
    body = response.json()
    # Transport-level, never a JSON-RPC error object (§6.1).
    assert "jsonrpc" not in body
    assert "error" in body


# -- the six refusals the issue names, plus their neighbours ---------------------------------------


async def test_missing_header_is_401_before_json_rpc(
    client: httpx.AsyncClient, engine: MemoryConnector
) -> None:
    assert_refused(await post(client, {}), presented=False)
    # Not even the envelope is looked at: garbage gets the same 401, not -32700.
    r = await client.post(
        "/a2m/docs", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert_refused(r, presented=False)
    assert engine.calls == 0


async def test_expired_token(client: httpx.AsyncClient, issuer: Issuer) -> None:
    assert_refused(await post(client, bearer(issuer.token(exp_in=-3600, groups=["team-a"]))))


async def test_expired_within_leeway_is_accepted(client: httpx.AsyncClient, issuer: Issuer) -> None:
    # Default leeway 30 s: a token that expired 5 s ago is clock skew, not an attack.
    r = await post(client, bearer(issuer.token(exp_in=-5, groups=["team-a"])))
    assert r.status_code == 200


async def test_not_yet_valid_token(client: httpx.AsyncClient, issuer: Issuer) -> None:
    assert_refused(await post(client, bearer(issuer.token(nbf_in=3600))))


async def test_wrong_issuer(client: httpx.AsyncClient, issuer: Issuer) -> None:
    assert_refused(await post(client, bearer(issuer.token(iss="https://evil.example/"))))


async def test_missing_issuer(client: httpx.AsyncClient, issuer: Issuer) -> None:
    assert_refused(await post(client, bearer(issuer.token(iss=None))))


async def test_wrong_audience(client: httpx.AsyncClient, issuer: Issuer) -> None:
    assert_refused(await post(client, bearer(issuer.token(aud="another-service"))))


async def test_missing_audience(client: httpx.AsyncClient, issuer: Issuer) -> None:
    assert_refused(await post(client, bearer(issuer.token(aud=None))))


async def test_missing_expiry(client: httpx.AsyncClient, issuer: Issuer) -> None:
    # A token without exp would be valid forever: required.
    assert_refused(await post(client, bearer(issuer.token(exp_in=None))))


async def test_wrong_signature(client: httpx.AsyncClient, issuer: Issuer) -> None:
    forged = issuer.token(key=issuer.other_rsa_key, groups=["team-a", "team-b"])
    assert_refused(await post(client, bearer(forged)))


async def test_tampered_payload(client: httpx.AsyncClient, issuer: Issuer) -> None:
    head, _, sig = issuer.token(groups=["team-a"]).split(".")
    payload = jwt.utils.base64url_encode(
        json.dumps(
            {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "exp": 2**33, "groups": ["team-b"]}
        ).encode()
    ).decode()
    assert_refused(await post(client, bearer(f"{head}.{payload}.{sig}")))


async def test_alg_none(client: httpx.AsyncClient) -> None:
    token = unsigned_token(sub="alice", iss=ISSUER, aud=AUDIENCE, exp=2**33, groups=["team-a"])
    assert_refused(await post(client, bearer(token)))


async def test_alg_not_configured_hs256_with_public_key_confusion(
    client: httpx.AsyncClient, issuer: Issuer
) -> None:
    # The classic confusion: HS256 "signed" with the RSA public key as the HMAC secret.
    jwk = next(k for k in issuer.jwks()["keys"] if k["kid"] == "rsa-1")
    public_pem = jwt.algorithms.RSAAlgorithm.from_jwk(json.dumps(jwk))
    from cryptography.hazmat.primitives import serialization

    pem = public_pem.public_bytes(  # type: ignore[union-attr]
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    forged = issuer.token(alg="HS256", key=HS_SECRET)
    assert_refused(await post(client, bearer(forged)))
    # Hand-built, since PyJWT itself refuses to HMAC with a PEM key.
    import hashlib
    import hmac

    signing_input = forged.rsplit(".", 1)[0].encode()
    sig = jwt.utils.base64url_encode(hmac.new(pem, signing_input, hashlib.sha256).digest())
    assert_refused(await post(client, bearer(f"{signing_input.decode()}.{sig.decode()}")))


async def test_unknown_kid(client: httpx.AsyncClient, issuer: Issuer) -> None:
    assert_refused(await post(client, bearer(issuer.token(kid="rotated-away"))))


async def test_kid_of_another_algorithm(client: httpx.AsyncClient, issuer: Issuer) -> None:
    # An RS256 token claiming the EC key's kid: the JWK's algorithm is bound, not the header's.
    assert_refused(await post(client, bearer(issuer.token(kid="ec-1"))))


@pytest.mark.parametrize(
    "header",
    [
        "Basic YWxpY2U6cGFzcw==",
        "Bearer",
        "Bearer ",
        "Bearer two tokens",
        "Bearertoken",
        "Token abc",
        "Bearer not-a-key-and-not-a-jwt",
        "Bearer a.b.c",
        "Bearer " + "A" * 40_000,
        "Bearer \u00e9t\u00e9",
    ],
)
async def test_malformed_or_unknown_credentials(client: httpx.AsyncClient, header: str) -> None:
    # Sent as raw latin-1 bytes: a client may put anything on the wire.
    assert_refused(await post(client, {"authorization": header.encode("latin-1")}))


async def test_unknown_api_key(client: httpx.AsyncClient) -> None:
    assert_refused(await post(client, bearer(generate_api_key())))
    assert_refused(await post(client, bearer(BOB_KEY + "x")))


async def test_refused_before_the_body_is_read(client: httpx.AsyncClient) -> None:
    # A body over max_body_bytes from an unauthenticated caller is a 401, not a 413:
    # nothing of the request is processed before the credential.
    big = b"{" + b" " * 2_000_000 + b"}"
    r = await client.post("/a2m/docs", content=big, headers={"content-type": "application/json"})
    assert_refused(r, presented=False)


async def test_unknown_store_is_not_revealed_before_auth(client: httpx.AsyncClient) -> None:
    assert_refused(await post(client, {}, path="/a2m/no-such-store"), presented=False)


async def test_discovery_documents_need_a_credential(
    client: httpx.AsyncClient, issuer: Issuer
) -> None:
    for path in ("/.well-known/a2m-server.json", "/a2m/docs/.well-known/a2m-server.json"):
        assert_refused(await client.get(path), presented=False)
        ok = await client.get(path, headers=bearer(issuer.token(groups=["team-a"])))
        assert ok.status_code == 200
        assert "scopes" in ok.json()["capabilities"]


async def test_operator_endpoints_stay_open(client: httpx.AsyncClient) -> None:
    # Kubernetes probes and Prometheus carry no token; these reveal no records.
    assert (await client.get("/healthz")).status_code == 200
    assert (await client.get("/readyz")).status_code == 200
    assert (await client.get("/metrics")).status_code == 200


async def test_origin_is_still_checked_first(client: httpx.AsyncClient, issuer: Issuer) -> None:
    headers = {**bearer(issuer.token()), "origin": "https://evil.example"}
    assert (await post(client, headers)).status_code == 403


# -- a valid credential gets its principal's scope and nothing more --------------------------------


async def recall_ids(client: httpx.AsyncClient, headers: dict[str, str], **params: Any) -> set[str]:
    r = await post(client, headers, rpc("memory/recall", {"query": "deploy keys", **params}))
    assert r.status_code == 200
    result = r.json()["result"]
    return {rec["id"] for rec in result["records"]}


@pytest.mark.parametrize(("alg", "kid"), [("RS256", "rsa-1"), ("ES256", "ec-1")])
async def test_valid_jwt_gets_exactly_its_groups(
    client: httpx.AsyncClient, issuer: Issuer, engine: MemoryConnector, alg: str, kid: str
) -> None:
    token = issuer.token(alg=alg, kid=kid, groups=["team-a"])
    got = await recall_ids(client, bearer(token), limit=100)
    expected = {i for i, s in engine.docs if visible_to(["team-a"], s)}
    assert got == expected
    # The condition reached the engine, built from the token, not from the body.
    assert engine.searches[-1].filter.must[0].field == "acl"
    assert engine.searches[-1].filter.must[0].values == ("team-a",)


async def test_valid_api_key_gets_exactly_its_groups(
    client: httpx.AsyncClient, engine: MemoryConnector
) -> None:
    got = await recall_ids(client, bearer(BOB_KEY), limit=100)
    assert got == {i for i, s in engine.docs if visible_to(["team-b"], s)}


async def test_a_principal_without_the_claim_sees_nothing(
    client: httpx.AsyncClient, issuer: Issuer, engine: MemoryConnector
) -> None:
    before = engine.calls
    assert await recall_ids(client, bearer(CAROL_KEY), limit=100) == set()
    assert await recall_ids(client, bearer(issuer.token(groups=[])), limit=100) == set()
    assert engine.calls == before  # fail closed without asking the engine


async def test_the_body_cannot_widen_the_scope(
    client: httpx.AsyncClient, issuer: Issuer, engine: MemoryConnector
) -> None:
    headers = bearer(issuer.token(groups=["team-a"]))
    allowed = {i for i, s in engine.docs if visible_to(["team-a"], s)}
    # Unmapped ACL field in where: matches nothing; a claim-shaped param: ignored.
    assert await recall_ids(client, headers, where={"acl": "team-b"}) == set()
    assert await recall_ids(client, headers, groups=["team-b"], limit=100) <= allowed
    assert await recall_ids(client, headers, sub="bob", limit=100) <= allowed
    # A disagreeing owner is refused.
    r = await post(client, headers, rpc("memory/recall", {"query": "x", "owner": "bob"}))
    assert r.json()["error"]["code"] == -32005


async def test_timeline_and_fetch_are_scoped_too(
    client: httpx.AsyncClient, issuer: Issuer, engine: MemoryConnector
) -> None:
    headers = bearer(issuer.token(groups=["team-a"]))
    r = await post(client, headers, rpc("memory/timeline", {"limit": 100}))
    got = {rec["id"] for rec in r.json()["result"]["records"]}
    assert got == {i for i, s in engine.docs if visible_to(["team-a"], s)}
    for doc_id, source in engine.docs[:8]:
        r = await post(client, headers, rpc("memory/fetch", {"key": source["k"]}))
        record = r.json()["result"]["record"]
        if visible_to(["team-a"], source):
            assert record is not None
            assert record["id"] == doc_id
        else:
            assert record is None  # not "forbidden": its existence is not revealed either


# -- HS256, a JWKS URL, and the verifier on its own ------------------------------------------------


async def test_hs256_with_a_shared_secret(issuer: Issuer, engine: MemoryConnector) -> None:
    server = {
        "auth": {
            "jwt": {
                "issuer": ISSUER,
                "audience": AUDIENCE,
                "algorithms": ["HS256"],
                "secret": HS_SECRET,
            }
        }
    }
    gateway = build_gateway(server, {"docs": memory_store_config(scope=SCOPE)}, {"docs": engine})
    async with asgi_client(gateway) as c:
        ok = await post(c, bearer(issuer.token(alg="HS256", groups=["team-b"])))
        assert ok.status_code == 200
        assert_refused(await post(c, bearer(issuer.token(alg="HS256", key="x" * 40))))
        # An RS256 token is refused here: only configured algorithms are considered.
        assert_refused(await post(c, bearer(issuer.token())))
    await gateway.close()


class JwksProvider:
    """A JWKS endpoint on the shared loopback peer: serves the keys, or answers 500, or hangs
    (until ``release`` is set) and then answers 500, as ``mode`` says."""

    def __init__(self, start: StartPeer, issuer: Issuer) -> None:
        self.mode = "ok"
        self.body = json.dumps(issuer.jwks()).encode()
        self.peer = start(self._answer)
        self.release = self.peer.release  # closing the peer releases a hanging fetch
        self.url = f"{self.peer.url}/jwks.json"

    @property
    def hits(self) -> int:
        return len(self.peer.requests)

    def _answer(self, request: PeerRequest) -> PeerReply:
        if self.mode == "hang":
            self.release.wait(30)
        if self.mode in ("fail", "hang"):
            return PeerReply(500)
        return PeerReply(200, self.body, {"content-type": "application/json"})


@pytest.fixture
def jwks(http_peer: StartPeer, issuer: Issuer) -> JwksProvider:
    return JwksProvider(http_peer, issuer)


async def test_jwks_url_is_fetched_once_and_cached(issuer: Issuer, jwks: JwksProvider) -> None:
    url, handler = jwks.url, jwks
    verifier = JwtVerifier(
        JwtConfig(
            issuer=ISSUER,
            audience=[AUDIENCE],
            algorithms=["RS256", "ES256"],
            jwks_url=url,
            jwks_cooldown_s=3600,
        )
    )
    for _ in range(5):
        assert (await verifier.verify(issuer.token())).subject == "alice"
    assert (await verifier.verify(issuer.token(alg="ES256", kid="ec-1"))).subject == "alice"
    assert handler.hits == 1
    # Unknown kids cannot make the gateway hammer the issuer: one refetch per cooldown at most.
    for i in range(5):
        with pytest.raises(AuthenticationError):
            await verifier.verify(issuer.token(kid=f"unknown-{i}"))
    assert handler.hits == 1  # the first fetch started the cooldown: no refetch within it


async def test_jwks_url_unreachable_is_401_not_500() -> None:
    verifier = JwtVerifier(
        JwtConfig(
            issuer=ISSUER,
            audience=[AUDIENCE],
            algorithms=["RS256"],
            jwks_url="http://127.0.0.1:9/jwks.json",
            jwks_timeout_ms=500,
        )
    )
    token = jwt.encode({"sub": "a"}, "k" * 32, algorithm="HS256", headers={"kid": "x"})
    token = token.replace(
        token.split(".")[0], jwt.utils.base64url_encode(b'{"alg":"RS256","kid":"x"}').decode()
    )
    with pytest.raises(AuthenticationError):
        await verifier.verify(token)


def test_jwks_file_that_cannot_be_read_fails_the_start(tmp_path: Path) -> None:
    bad = tmp_path / "jwks.json"
    bad.write_text("{not json")
    cfg = JwtConfig(issuer=ISSUER, audience=[AUDIENCE], algorithms=["RS256"], jwks_file=str(bad))
    with pytest.raises(ConfigError) as info:
        JwtVerifier(cfg)
    assert "not json" not in str(info.value)


async def test_jwks_file_rotation_is_picked_up(tmp_path: Path, issuer: Issuer) -> None:
    path = tmp_path / "jwks.json"
    keys = issuer.jwks()["keys"]
    path.write_text(json.dumps({"keys": [keys[1]]}))  # only the EC key at first
    verifier = JwtVerifier(
        JwtConfig(issuer=ISSUER, audience=[AUDIENCE], algorithms=["RS256"], jwks_file=str(path))
    )
    with pytest.raises(AuthenticationError):
        await verifier.verify(issuer.token())
    path.write_text(json.dumps({"keys": keys}))
    import os

    os.utime(path, (1, 2))  # a different mtime, as a remounted secret has
    assert (await verifier.verify(issuer.token())).subject == "alice"


async def test_jwks_file_is_reread_off_the_event_loop(tmp_path: Path, issuer: Issuer) -> None:
    """A slow mount must not stall the loop while a rotated file is read."""

    path = tmp_path / "jwks.json"
    keys = issuer.jwks()["keys"]
    path.write_text(json.dumps({"keys": [keys[1]]}))
    verifier = JwtVerifier(
        JwtConfig(issuer=ISSUER, audience=[AUDIENCE], algorithms=["RS256"], jwks_file=str(path))
    )
    threads: list[int] = []
    load = verifier._load_file

    def recording_load() -> None:
        threads.append(threading.get_ident())
        load()

    verifier._load_file = recording_load  # type: ignore[method-assign]
    path.write_text(json.dumps({"keys": keys}))
    os.utime(path, (3, 4))
    assert (await verifier.verify(issuer.token())).subject == "alice"
    assert threads
    assert threading.get_ident() not in threads


def test_bearer_header_parsing() -> None:
    assert bearer_token("Bearer abc.def-_~+/=") == "abc.def-_~+/="
    assert bearer_token("bearer   tok  ") == "tok"
    for bad in (None, "", "  ", "Basic x", "Bearer a b", "Bearer\ttok"):
        with pytest.raises(AuthenticationError):
            bearer_token(bad)


def test_api_keys_are_compared_by_hash() -> None:
    verifier = ApiKeyVerifier(
        [ApiKeyEntry(subject="bob", hash=hash_api_key(BOB_KEY), claims={"groups": ["g"]})]
    )
    principal = verifier.verify(BOB_KEY)
    assert principal is not None
    assert principal.subject == "bob"
    assert principal.claims == {"groups": ["g"], "sub": "bob"}
    assert principal.credential is None  # an API key is never kept, so never forwarded
    assert verifier.verify(BOB_KEY.upper()) is None
    assert verifier.verify("") is None


def test_generated_keys_are_long_and_distinct() -> None:
    keys = {generate_api_key() for _ in range(100)}
    assert len(keys) == 100
    assert all(len(k) >= 40 for k in keys)


async def test_auth_off_admits_everyone_as_anonymous() -> None:
    auth = Authenticator(AuthConfig())
    assert await auth.authenticate(None) is None
    assert await auth.authenticate("Bearer whatever") is None


# -- JWKS fetches are single-flight and failures are cooled down ------------------


def _verifier(url: str, **overrides: Any) -> JwtVerifier:
    settings: dict[str, Any] = {
        "issuer": ISSUER,
        "audience": [AUDIENCE],
        "algorithms": ["RS256", "ES256"],
        "jwks_url": url,
        "jwks_cooldown_s": 3600,
        **overrides,
    }
    return JwtVerifier(JwtConfig(**settings))


async def test_a_failing_provider_is_asked_once_per_cooldown(
    issuer: Issuer, jwks: JwksProvider
) -> None:
    url, handler = jwks.url, jwks
    handler.mode = "fail"
    verifier = _verifier(url)
    for i in range(50):
        with pytest.raises(AuthenticationError):
            await verifier.verify(issuer.token(kid=f"bogus-{i}"))
    assert handler.hits == 1


async def test_concurrent_tokens_share_one_fetch_of_a_hanging_provider(
    issuer: Issuer, jwks: JwksProvider
) -> None:
    url, handler = jwks.url, jwks
    handler.mode = "hang"
    verifier = _verifier(url, jwks_timeout_ms=30_000)

    async def one(i: int) -> None:
        with pytest.raises(AuthenticationError):
            await verifier.verify(issuer.token(kid=f"bogus-{i}"))

    tasks = [asyncio.create_task(one(i)) for i in range(60)]
    for _ in range(2000):  # until the one fetch reached the provider
        if handler.hits:
            break
        await asyncio.sleep(0.005)
    handler.release.set()
    await asyncio.gather(*tasks)
    assert handler.hits == 1


async def test_cached_keys_outlive_a_provider_outage(issuer: Issuer, jwks: JwksProvider) -> None:
    url, handler = jwks.url, jwks
    verifier = _verifier(url, jwks_cache_s=0.001, jwks_cooldown_s=3600)
    assert (await verifier.verify(issuer.token())).subject == "alice"
    handler.mode = "fail"
    for _ in range(20):  # the cache has expired each time; the provider is down
        assert (await verifier.verify(issuer.token())).subject == "alice"
        with pytest.raises(AuthenticationError):
            await verifier.verify(issuer.token(kid="rotated-away"))
    assert handler.hits == 2  # the first fetch, and one failed refresh in the cooldown


@pytest.mark.parametrize(
    "exp", ["9999999999", 9_999_999_999.5, 1e30, True, [9_999_999_999], {"t": 1}]
)
async def test_a_non_integer_exp_is_refused(
    client: httpx.AsyncClient, issuer: Issuer, exp: Any
) -> None:
    token = jwt.encode(
        {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "exp": exp},
        issuer.rsa_key,
        algorithm="RS256",
        headers={"kid": "rsa-1"},
    )
    assert_refused(await post(client, bearer(token)))


def _key_file(path: Path, *keys: tuple[str, str], mtime: int) -> None:
    import yaml

    path.write_text(yaml.safe_dump([{"subject": s, "hash": hash_api_key(k)} for s, k in keys]))
    os.utime(path, (mtime, mtime))


def _key_file_authenticator(path: Path) -> Authenticator:
    from gateway.config import parse_config

    cfg = parse_config(
        {
            "server": {"auth": {"api_keys_file": str(path)}},
            "stores": {"docs": memory_store_config()},
        }
    )
    return Authenticator(cfg.server.auth)


async def test_api_keys_file_follows_the_jwks_file_rule(tmp_path: Path) -> None:
    """`api_keys_file`, like `jwks_file`, is re-read when a key matches nothing and
    the file changed: an added key works without a restart, a removed one stops then."""
    path = tmp_path / "keys.yaml"
    _key_file(path, ("bob", BOB_KEY), mtime=10)
    auth = _key_file_authenticator(path)
    assert (await auth.authenticate(f"Bearer {BOB_KEY}")) is not None
    with pytest.raises(AuthenticationError):
        await auth.authenticate(f"Bearer {CAROL_KEY}")

    # Carol's key lands in the file but its mtime is unchanged: the file is not re-read.
    _key_file(path, ("bob", BOB_KEY), ("carol", CAROL_KEY), mtime=10)
    with pytest.raises(AuthenticationError):
        await auth.authenticate(f"Bearer {CAROL_KEY}")

    _key_file(path, ("carol", CAROL_KEY), mtime=20)  # rotated: Bob's key removed
    carol = await auth.authenticate(f"Bearer {CAROL_KEY}")
    assert carol is not None
    assert carol.subject == "carol"
    with pytest.raises(AuthenticationError):
        await auth.authenticate(f"Bearer {BOB_KEY}")


async def test_a_broken_rotated_key_file_keeps_the_keys_read_before(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "keys.yaml"
    _key_file(path, ("bob", BOB_KEY), mtime=10)
    auth = _key_file_authenticator(path)
    path.write_text("- subject: carol\n  hash: " + CAROL_KEY + "\n")  # the key, not its hash
    os.utime(path, (20, 20))
    with pytest.raises(AuthenticationError):
        await auth.authenticate(f"Bearer {CAROL_KEY}")
    assert "entry 0 is invalid" in caplog.text
    assert CAROL_KEY not in caplog.text
    bob = await auth.authenticate(f"Bearer {BOB_KEY}")
    assert bob is not None
    assert bob.subject == "bob"


async def test_api_keys_file_is_reread_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gateway.security.api_keys
    from gateway.config import read_api_keys as read

    path = tmp_path / "keys.yaml"
    _key_file(path, ("bob", BOB_KEY), mtime=10)
    auth = _key_file_authenticator(path)
    threads: list[int] = []

    def recording_read(p: str) -> list[ApiKeyEntry]:
        threads.append(threading.get_ident())
        return read(p)

    monkeypatch.setattr(gateway.security.api_keys, "read_api_keys", recording_read)
    _key_file(path, ("carol", CAROL_KEY), mtime=20)
    assert (await auth.authenticate(f"Bearer {CAROL_KEY}")) is not None
    assert threads
    assert threading.get_ident() not in threads


async def test_protected_resource_metadata_names_the_scopes_to_request(issuer: Issuer) -> None:
    # Without scopes_supported an MCP SDK asks for every scope the IdP lists (Keycloak refuses).
    mcp = {"resource": "https://memory.test.example/mcp", "scopes_supported": ["openid"]}
    for extra, expected in (({}, None), (mcp, ["openid"])):
        gateway = build_gateway(
            {"auth": auth_section(issuer), "mcp": extra},
            {"docs": memory_store_config()},
            {"docs": MemoryConnector([])},
        )
        async with asgi_client(gateway) as c:
            r = await c.get("/.well-known/oauth-protected-resource/mcp")
        await gateway.close()
        assert r.status_code == 200, r.text
        assert r.json().get("scopes_supported") == expected
        assert r.json()["authorization_servers"] == [ISSUER]


async def test_authorized_parties_admit_only_the_listed_clients(
    issuer: Issuer, engine: MemoryConnector
) -> None:
    gateway = build_gateway(
        {"auth": auth_section(issuer, authorized_parties=["svc-a"])},
        {"docs": memory_store_config(scope=SCOPE)},
        {"docs": engine},
    )
    async with asgi_client(gateway) as c:
        ok = await post(c, bearer(issuer.token(groups=["team-a"], azp="svc-a")))
        assert ok.status_code == 200, ok.text
        # RFC 9068 access tokens name the client in client_id.
        rfc9068 = await post(c, bearer(issuer.token(groups=["team-a"], client_id="svc-a")))
        assert rfc9068.status_code == 200, rfc9068.text
        for claims in ({"azp": "svc-b"}, {}, {"azp": ["svc-a"]}, {"client_id": 7}):
            assert_refused(await post(c, bearer(issuer.token(groups=["team-a"], **claims))))
    await gateway.close()
