"""Shared pieces of the security tests: an in-memory engine, key material, tokens, apps.

:class:`MemoryConnector` (``tests/support/memory_connector.py``) applies filters as the
real connectors do, so scope semantics can be tested end to end without an engine. The
real-engine tests live in ``test_scoped_engines.py``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from gateway.config import GatewayConfig, parse_config
from gateway.runtime import Gateway
from gateway.security.auth import hash_api_key
from tests.support.asgi import asgi_client as asgi_client
from tests.support.memory_connector import MemoryConnector as MemoryConnector
from tests.support.memory_connector import values_of

ISSUER = "https://idp.test.example/"
AUDIENCE = "a2m-gateway"
HS_SECRET = "hs256-shared-secret-for-tests-0123456789abcdef"
BOB_KEY = "a2m_bob-test-key-0123456789-abcdefghijklmnopqrstuvwxyz"
CAROL_KEY = "a2m_carol-test-key-0123456789-abcdefghijklmnopqrstuvw"


def acl_docs(n: int = 60) -> list[tuple[str, dict[str, Any]]]:
    """Documents with an ACL and an owner: i % 4 == 0 shared, 1 team-a, 2 team-b, 3 nobody."""
    acl = [["team-a", "team-b"], ["team-a"], ["team-b"], ["team-c"]]
    owners = ["alice", "bob", "carol"]
    return [
        (
            str(i),
            {
                "body": f"memory record number {i} about deploy keys and rotation",
                "k": f"doc/{i}",
                "ts": f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z",
                "acl": acl[i % 4],
                "own": owners[i % 3],
                "secret_note": f"classified-{i}",
                "lang": "en",
            },
        )
        for i in range(n)
    ]


def visible_to(groups: Sequence[str], source: Mapping[str, Any]) -> bool:
    return bool(set(groups) & set(values_of(source, "acl")))


# -- key material and tokens -----------------------------------------------------------------------


@dataclass
class Issuer:
    """An identity provider for the tests: RSA and EC signing keys, their JWKS file."""

    rsa_key: rsa.RSAPrivateKey
    ec_key: ec.EllipticCurvePrivateKey
    other_rsa_key: rsa.RSAPrivateKey
    """Not in the JWKS: tokens it signs must fail (wrong signature)."""
    jwks_path: Path

    @classmethod
    def create(cls, directory: Path) -> Issuer:
        rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        ec_key = ec.generate_private_key(ec.SECP256R1())
        other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        rsa_jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key.public_key()))
        ec_jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(ec_key.public_key()))
        rsa_jwk.update(kid="rsa-1", alg="RS256", use="sig")
        ec_jwk.update(kid="ec-1", alg="ES256", use="sig")
        path = directory / "jwks.json"
        path.write_text(json.dumps({"keys": [rsa_jwk, ec_jwk]}), encoding="utf-8")
        return cls(rsa_key, ec_key, other, path)

    def jwks(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.jwks_path.read_text(encoding="utf-8"))
        return data

    def token(
        self,
        sub: str | None = "alice",
        *,
        alg: str = "RS256",
        kid: str | None = "rsa-1",
        iss: str | None = ISSUER,
        aud: str | None = AUDIENCE,
        exp_in: float | None = 300,
        nbf_in: float | None = None,
        key: Any = None,
        **claims: Any,
    ) -> str:
        now = time.time()
        payload: dict[str, Any] = {"iat": int(now), **claims}
        if sub is not None:
            payload["sub"] = sub
        if iss is not None:
            payload["iss"] = iss
        if aud is not None:
            payload["aud"] = aud
        if exp_in is not None:
            payload["exp"] = int(now + exp_in)
        if nbf_in is not None:
            payload["nbf"] = int(now + nbf_in)
        headers = {"kid": kid} if kid is not None else {}
        if key is None:
            key = {"RS256": self.rsa_key, "ES256": self.ec_key, "HS256": HS_SECRET}[alg]
        return jwt.encode(payload, key, algorithm=alg, headers=headers)


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def unsigned_token(**payload: Any) -> str:
    """A token with `alg: none` and an empty signature (RFC 7519 §6.1)."""
    import base64

    def b64(obj: Any) -> str:
        raw = json.dumps(obj, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    return f"{b64({'alg': 'none', 'typ': 'JWT'})}.{b64(payload)}."


def auth_section(
    issuer: Issuer, bob_groups: Sequence[str] = ("team-b",), **jwt_overrides: Any
) -> dict[str, Any]:
    """server.auth with two API keys (bob: team-b, carol: no groups) and RS256/ES256 JWTs."""
    return {
        "api_keys": [
            {
                "subject": "bob",
                "hash": hash_api_key(BOB_KEY),
                "claims": {"groups": list(bob_groups)},
            },
            {"subject": "carol", "hash": hash_api_key(CAROL_KEY)},
        ],
        "jwt": {
            "issuer": ISSUER,
            "audience": AUDIENCE,
            "algorithms": ["RS256", "ES256"],
            "jwks_file": str(issuer.jwks_path),
            **jwt_overrides,
        },
    }


# -- a gateway over the in-memory engine -----------------------------------------------------------


def memory_store_config(
    *, scope: Mapping[str, Any] | None = None, owner: bool = True, **mapping: Any
) -> dict[str, Any]:
    """One store (`docs`) mapping body/k/ts (and own as owner); acl and secret_note unmapped."""
    m: dict[str, Any] = {"content": "body", "key": "k", "created_at": "ts", "metadata": ["lang"]}
    if owner:
        m["owner"] = "own"
    m.update(mapping)
    store: dict[str, Any] = {
        "backend": "elasticsearch",
        "index": "docs",
        "connection": {"hosts": ["http://127.0.0.1:9"]},
        "mapping": m,
        "search": {"text_fields": ["body"]},
        "limits": {"max_recall_limit": 100},
    }
    if scope is not None:
        store["scope"] = dict(scope)
    return store


def build_gateway(
    server: Mapping[str, Any],
    stores: Mapping[str, Mapping[str, Any]],
    connectors: Mapping[str, Any],
    federations: Mapping[str, Mapping[str, Any]] | None = None,
) -> Gateway:
    """A gateway whose stores read from the given connectors instead of real engines."""
    doc = {"server": dict(server), "stores": dict(stores), "federations": dict(federations or {})}
    cfg: GatewayConfig = parse_config(doc)
    gateway = Gateway(cfg)
    for name, connector in connectors.items():
        gateway.stores[name].connector = connector
    return gateway


def rpc(method: str, params: Any = None, rid: Any = 1) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


# -- a Qdrant collection in process (qdrant-edge) -------------------------------------------------

SPARSE = "text-sparse"


def write_qdrant(
    path: Path, collection: str, docs: Sequence[tuple[int, Mapping[str, Any]]], text_field: str
) -> None:
    """Create ``collection`` at ``path`` (a qdrant-edge shard), a lexical sparse vector per point.

    The shard is closed before returning: it opens in one process at a time.
    """
    from qdrant_client import models

    from connectors.qdrant.sparse import LexicalSparseEncoder
    from tests.support.edge_client import EdgeWriter

    texts = [str(p[text_field]) for _, p in docs]
    encoder = LexicalSparseEncoder(avgdl=LexicalSparseEncoder.average_length(texts))
    client = EdgeWriter(path)
    try:
        client.create_collection(
            collection,
            vectors_config={},
            sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
        )
        points = []
        for (point_id, payload), text in zip(docs, texts, strict=True):
            sv = encoder.encode_document(text)
            vector = models.SparseVector(indices=list(sv.indices), values=list(sv.values))
            points.append(
                models.PointStruct(id=point_id, vector={SPARSE: vector}, payload=dict(payload))
            )
        client.upsert(collection, points=points)
    finally:
        client.close()
