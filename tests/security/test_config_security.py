"""server.auth, scope and exposure settings: validated at start, never echoing a secret."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.config import ConfigError, GatewayConfig, is_loopback, parse_config
from gateway.security.auth import check_exposure, hash_api_key
from tests.security.support import AUDIENCE, BOB_KEY, HS_SECRET, ISSUER, Issuer, memory_store_config


def config(server: dict[str, Any] | None = None, **store: Any) -> GatewayConfig:
    return parse_config({"server": server or {}, "stores": {"docs": memory_store_config(**store)}})


def jwt_section(**kw: Any) -> dict[str, Any]:
    return {"issuer": ISSUER, "audience": AUDIENCE, **kw}


def test_configuring_a_credential_turns_authentication_on() -> None:
    cfg = config({"auth": {"api_keys": [{"subject": "b", "hash": hash_api_key(BOB_KEY)}]}})
    assert cfg.server.auth.mode == "bearer"
    assert config().server.auth.mode == "none"


@pytest.mark.parametrize(
    ("auth", "message"),
    [
        (
            {"mode": "none", "api_keys": [{"subject": "b", "hash": "sha256:" + "0" * 64}]},
            "mode is none",
        ),
        ({"mode": "bearer"}, "needs api_keys"),
        ({"api_keys": [{"subject": "b", "hash": "md5:abc"}]}, "sha256"),
        (
            {
                "api_keys": [
                    {"subject": "a", "hash": "sha256:" + "1" * 64},
                    {"subject": "b", "hash": "sha256:" + "1" * 64},
                ]
            },
            "appears twice",
        ),
        ({"jwt": jwt_section(algorithms=["none"], secret=HS_SECRET)}, "algorithms"),
        (
            {"jwt": jwt_section(algorithms=["HS256", "RS256"], secret=HS_SECRET)},
            "do not mix",
        ),
        ({"jwt": jwt_section(algorithms=["HS256"])}, "need jwt.secret"),
        ({"jwt": jwt_section(algorithms=["HS256"], secret="short")}, "at least 32"),
        ({"jwt": jwt_section(algorithms=["RS256"])}, "exactly one of jwks_url"),
        (
            {"jwt": jwt_section(algorithms=["RS256"], jwks_url="http://idp.example/jwks")},
            "https",
        ),
        (
            {"jwt": jwt_section(algorithms=["RS256"], jwks_url="https://x", secret=HS_SECRET)},
            "applies to HS",
        ),
        ({"jwt": {"issuer": ISSUER, "algorithms": ["RS256"], "jwks_url": "https://x"}}, "audience"),
        ({"jwt": jwt_section(algorithms=["RS256"], jwks_url="https://x", leeway_s=3600)}, "leeway"),
    ],
)
def test_bad_auth_configs_are_refused(auth: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        config({"auth": auth})
    assert "short" not in str(info.value)  # a secret value is never echoed


def test_api_keys_file_is_read_and_never_quoted(tmp_path: Path) -> None:
    keys = tmp_path / "keys.yaml"
    keys.write_text(
        yaml.safe_dump(
            [{"subject": "bob", "hash": hash_api_key(BOB_KEY), "claims": {"groups": ["g"]}}]
        )
    )
    cfg = config({"auth": {"api_keys_file": str(keys)}})
    assert cfg.server.auth.enabled
    assert [k.subject for k in cfg.server.auth.all_api_keys()] == ["bob"]
    # A dumped config does not carry the file's keys inline, so reloading it is stable.
    dumped = cfg.model_dump(mode="json")
    assert dumped["server"]["auth"]["api_keys"] == []
    again = parse_config(dumped)
    assert [k.subject for k in again.server.auth.all_api_keys()] == ["bob"]

    keys.write_text("- subject: bob\n  hash: the-real-key-is-not-a-hash\n")
    with pytest.raises(ConfigError) as info:
        config({"auth": {"api_keys_file": str(keys)}})
    assert "entry 0 is invalid" in str(info.value)
    assert "the-real-key" not in str(info.value)
    with pytest.raises(ConfigError, match="cannot be read"):
        config({"auth": {"api_keys_file": str(tmp_path / "missing.yaml")}})


def test_secrets_come_from_files(tmp_path: Path, issuer: Issuer) -> None:
    secret = tmp_path / "hs"
    secret.write_text(HS_SECRET + "\n")
    cfg = config({"auth": {"jwt": jwt_section(algorithms=["HS256"], secret=f"${{file:{secret}}}")}})
    assert cfg.server.auth.jwt is not None
    assert cfg.server.auth.jwt.secret is not None
    assert cfg.server.auth.jwt.secret.get_secret_value() == HS_SECRET
    assert HS_SECRET not in repr(cfg)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("example.com", False),
    ],
)
def test_loopback_detection(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_network_bind_without_auth_is_refused(issuer: Issuer) -> None:
    with pytest.raises(ConfigError, match="allow_unauthenticated_network"):
        check_exposure(config(), "0.0.0.0")
    assert check_exposure(config(), "127.0.0.1") == []
    # With authentication the network is fine.
    authed = config({"auth": {"api_keys": [{"subject": "b", "hash": hash_api_key(BOB_KEY)}]}})
    assert check_exposure(authed, "0.0.0.0") == []
    # The escape hatch works, and is loud.
    hatch = config({"auth": {"allow_unauthenticated_network": True}})
    (warning,) = check_exposure(hatch, "0.0.0.0")
    assert "WITHOUT AUTHENTICATION" in warning


def test_a_claim_scoped_store_needs_authentication() -> None:
    scoped = config(scope={"filters": [{"field": "acl", "claims": ["groups"]}]})
    with pytest.raises(ConfigError, match=r"scope\.filters"):
        check_exposure(scoped, "127.0.0.1")


def test_scope_filter_shapes() -> None:
    cfg = config(scope={"filters": [{"field": "acl", "claims": ["groups", {"claim": "sub"}]}]})
    (rule,) = cfg.stores["docs"].scope.filters
    assert [(c.claim, c.prefix) for c in rule.claims] == [("groups", ""), ("sub", "")]
    for bad in ({"field": "_id", "claims": ["sub"]}, {"field": "acl", "claims": []}):
        with pytest.raises(ConfigError):
            config(scope={"filters": [bad]})


def _cli(args: list[str], tmp_path: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "A2M_DATA_DIR": str(tmp_path / "data")}
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_serve_refuses_an_unauthenticated_network_bind(tmp_path: Path) -> None:
    proc = _cli(["serve", "--host", "0.0.0.0", "--port", "0"], tmp_path)
    assert proc.returncode == 2
    assert "without authentication" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_hash_key_cli(tmp_path: Path) -> None:
    proc = _cli(["hash-key"], tmp_path, stdin=BOB_KEY + "\n")
    assert proc.returncode == 0
    assert proc.stdout.strip() == hash_api_key(BOB_KEY)
    assert BOB_KEY not in proc.stdout + proc.stderr
    new = _cli(["hash-key", "--new"], tmp_path)
    assert new.returncode == 0
    key = new.stderr.rsplit(" ", 1)[-1].strip()
    assert key.startswith("a2m_")
    assert new.stdout.strip() == hash_api_key(key)
    assert key not in new.stdout  # stdout can go to a file; the key must not
    short = _cli(["hash-key"], tmp_path, stdin="short\n")
    assert short.returncode == 2


def test_jwks_json_is_not_required_to_be_yaml(tmp_path: Path, issuer: Issuer) -> None:
    # The JWKS file is JSON, read as such; an auth config referencing it validates.
    cfg = config(
        {"auth": {"jwt": jwt_section(algorithms=["RS256"], jwks_file=str(issuer.jwks_path))}}
    )
    assert cfg.server.auth.jwt is not None
    assert json.loads(issuer.jwks_path.read_text())["keys"]


def test_forwarding_needs_jwt_callers(issuer: Issuer) -> None:
    keys_only = {"auth": {"api_keys": [{"subject": "b", "hash": hash_api_key(BOB_KEY)}]}}
    cfg = config(keys_only, scope={"forward_credential": True})
    with pytest.raises(ConfigError, match=r"server\.auth\.jwt"):
        check_exposure(cfg, "127.0.0.1")
    with_jwt = config(
        {"auth": {"jwt": jwt_section(algorithms=["RS256"], jwks_file=str(issuer.jwks_path))}},
        scope={"forward_credential": True},
    )
    assert check_exposure(with_jwt, "127.0.0.1") == []
