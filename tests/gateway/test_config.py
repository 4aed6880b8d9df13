from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.config import ConfigError, load_config, parse_config


def es_store(**over: Any) -> dict[str, Any]:
    store: dict[str, Any] = {
        "backend": "elasticsearch",
        "index": "docs",
        "connection": {"hosts": ["http://127.0.0.1:9200"]},
        "mapping": {"content": "body"},
        "search": {"text_fields": ["title^2", "body"]},
    }
    store.update(over)
    return store


def test_minimal_store_is_valid() -> None:
    cfg = parse_config({"stores": {"docs": es_store()}})
    assert cfg.default_store == "docs"
    assert cfg.server.host == "127.0.0.1"
    assert cfg.server.allowed_origins == []


@pytest.mark.parametrize(
    ("store", "field"),
    [
        (es_store(backend="solr"), "stores.docs.backend"),
        (es_store(connection={}), "hosts or cloud_id"),
        (es_store(search={"text_fields": []}), "search.text_fields"),
        (es_store(search={"mode": "dense", "text_fields": ["b"]}), "search.vector_field"),
        (es_store(mapping={"content": "a", "content_template": "{a}"}), "content_template"),
        (es_store(mapping={"content_template": "{}"}), "content_template"),
        (es_store(mapping={"content": "a", "unknown": 1}), "stores.docs.mapping.unknown"),
        (es_store(limits={"max_recall_limit": 0}), "max_recall_limit"),
        (
            {
                "backend": "qdrant",
                "index": "c",
                "connection": {"url": "http://q", "path": "/x"},
                "mapping": {"content": "c"},
                "search": {"mode": "lexical", "sparse_vector": "s"},
            },
            "exactly one of url, path, location",
        ),
    ],
)
def test_errors_name_the_bad_field(store: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"stores": {"docs": store}})
    assert field in str(info.value)


def test_bad_store_name_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"stores\.Bad Name"):
        parse_config({"stores": {"Bad Name": es_store()}})


def test_secrets_from_env_and_file_never_in_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret_file = tmp_path / "key"
    secret_file.write_text("file-secret-value\n")
    monkeypatch.setenv("ES_API_KEY", "env-secret-value")
    conn = {"hosts": ["http://h:9200"], "api_key": "${ES_API_KEY}"}
    cfg = parse_config({"stores": {"docs": es_store(connection=conn)}})
    key = cfg.stores["docs"].connection.api_key
    assert key is not None
    assert key.get_secret_value() == "env-secret-value"
    assert "env-secret-value" not in repr(cfg)

    conn = {"hosts": ["http://h:9200"], "api_key": f"${{file:{secret_file}}}"}
    cfg = parse_config({"stores": {"docs": es_store(connection=conn)}})
    key = cfg.stores["docs"].connection.api_key
    assert key is not None
    assert key.get_secret_value() == "file-secret-value"

    conn = {"hosts": ["http://h:9200"], "api_key": "${file:/nonexistent/secret}", "username": "u"}
    with pytest.raises(ConfigError, match=r"stores\.docs\.connection\.api_key"):
        parse_config({"stores": {"docs": es_store(connection=conn)}})
    with pytest.raises(ConfigError, match="NOT_SET_ANYWHERE"):
        parse_config({"stores": {"docs": es_store(connection={"hosts": ["${NOT_SET_ANYWHERE}"]})}})


def test_two_auth_modes_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    conn = {"hosts": ["http://h"], "api_key": "a", "bearer_token": "b"}
    with pytest.raises(ConfigError, match="choose one"):
        parse_config({"stores": {"docs": es_store(connection=conn)}})


def test_yaml_errors_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("stores: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="cannot be read"):
        load_config(tmp_path / "missing.yaml")


def test_example_configs_validate(monkeypatch: pytest.MonkeyPatch) -> None:
    root = Path(__file__).resolve().parents[2] / "config"
    for var in (
        "ES_API_KEY",
        "OPENSEARCH_PASSWORD",
        "QDRANT_API_KEY",
        "OPENAI_API_KEY",
        "AOS_ENDPOINT",
    ):
        monkeypatch.setenv(var, "x")
    files = sorted(root.glob("**/*.yaml"))
    assert files, "config/ holds the example configs"
    for f in files:
        text = f.read_text()
        assert "${" in text or "demo" in f.name, f"{f.name}: secrets must come from ${{...}}"
        load_config(f)


def test_a_doubled_dollar_is_a_literal_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 13: `$${` escapes a `${` that is not a reference (e.g. inside a description)."""
    monkeypatch.setenv("A2M_R2_SET", "expanded")
    store = es_store(description="costs $${HOME} and ${A2M_R2_SET}")
    cfg = parse_config({"stores": {"docs": store}})
    assert cfg.stores["docs"].description == "costs ${HOME} and expanded"
