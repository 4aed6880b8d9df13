"""What authenticating one caller costs: ``Authenticator.authenticate`` alone, in process.

    python -m bench.auth_cost [--calls 20000] [--rounds 5] [--root DIR]

With one API key and HS256 JWTs configured, each round authenticates ``--calls`` headers of
one kind in a row: the API key, a valid JWT, and a token no kind claims (refused). Per kind,
the process time per call of the best round (the least disturbed by other load) and the
load average beside it. ``--root DIR`` measures the gateway of another checkout (its
``gateway`` package first on the import path); to compare two trees, run it once each.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import secrets
import sys
import time
from typing import TYPE_CHECKING

import jwt

from bench.machine import load_text

if TYPE_CHECKING:
    from gateway.security.auth import Authenticator


def hs256(secret: str) -> tuple[dict[str, object], str]:
    """``server.auth.jwt`` accepting HS256 tokens signed with ``secret``, and a token it
    accepts for a day (subject ``bench``)."""
    issuer, audience = "https://bench.example/", "a2m-bench"
    config: dict[str, object] = {
        "issuer": issuer,
        "audience": [audience],
        "algorithms": ["HS256"],
        "secret": secret,
    }
    now = int(time.time())
    claims = {"sub": "bench", "iss": issuer, "aud": audience, "iat": now, "exp": now + 86_400}
    return config, jwt.encode(claims, secret, algorithm="HS256")


def _setup() -> tuple[Authenticator, dict[str, str]]:
    from gateway.config import AuthConfig
    from gateway.security.auth import Authenticator, hash_api_key

    key, secret = "a2m_" + secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    jwt_config, token = hs256(secret)
    config = AuthConfig.model_validate(
        {"api_keys": [{"subject": "bench", "hash": hash_api_key(key)}], "jwt": jwt_config}
    )
    headers = {"api key": key, "HS256 JWT": token, "unclaimed": "no-kind-claims-this"}
    return Authenticator(config), {k: f"Bearer {v}" for k, v in headers.items()}


async def _per_call_us(auth: Authenticator, header: str, calls: int) -> float:
    from gateway.security.credential import AuthenticationError

    start = time.process_time()
    for _ in range(calls):
        with contextlib.suppress(AuthenticationError):
            await auth.authenticate(header)
    return (time.process_time() - start) / calls * 1e6


async def measure(calls: int, rounds: int) -> dict[str, float]:
    """Per kind, the best round's process time per call in microseconds."""
    auth, headers = _setup()
    best: dict[str, float] = {}
    for kind, header in headers.items():
        await _per_call_us(auth, header, max(calls // 10, 1))  # warm up
        best[kind] = min([await _per_call_us(auth, header, calls) for _ in range(rounds)])
    return best


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.auth_cost", description=__doc__)
    p.add_argument("--calls", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--root", help="measure the gateway package of this checkout")
    args = p.parse_args()
    if args.root:
        sys.path.insert(0, args.root)
    import gateway

    best = asyncio.run(measure(args.calls, args.rounds))
    print(f"{gateway.__file__} (load average {load_text()})")
    for kind, us in best.items():
        print(f"| {kind} | {us:.2f} µs/call |")


if __name__ == "__main__":
    main()
