from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from connectors.qdrant.spec import QdrantConnectionSpec
from gateway.config import ConfigError, load_config, parse_config
from gateway.install import extra_command


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
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path)


def test_a_yaml_error_names_line_column_and_cause(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("stores:\n  docs:\n    backend: qdrant\n    index: a: b\n")
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    assert str(info.value).endswith(
        "is not valid YAML at line 4, column 13: mapping values are not allowed here"
    )


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (
            {"stores": {"docs": es_store(search={"mode": "fuzzy", "text_fields": ["b"]})}},
            "stores.docs.search.mode: must be one of lexical, dense, hybrid",
        ),
        ({"stores": {}}, "stores: at least one store is required"),
        (
            {"stores": {"docs": es_store(index=5)}},
            "stores.docs.index: expected a string",
        ),
        (
            {"stores": {"docs": {k: v for k, v in es_store().items() if k != "index"}}},
            "stores.docs.index: is required",
        ),
    ],
)
def test_config_errors_speak_the_projects_words(data: dict[str, Any], line: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert str(info.value) == f"invalid config: {line}"
    for pydantic_words in ("Input should", "Value error", "Field required"):
        assert pydantic_words not in str(info.value)


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
        cfg = load_config(f)
        # The examples embed with the torch-free minilm extra, never sentence-transformers.
        kinds = {store.search.embedder.kind.value for store in cfg.stores.values()}
        assert "local" not in kinds, f.name


def test_a_doubled_dollar_is_a_literal_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """`$${` escapes a `${` that is not a reference (e.g. inside a description)."""
    monkeypatch.setenv("A2M_R2_SET", "expanded")
    store = es_store(description="costs $${HOME} and ${A2M_R2_SET}")
    cfg = parse_config({"stores": {"docs": store}})
    assert cfg.stores["docs"].description == "costs ${HOME} and expanded"


# -- one model per backend ------------------------------------------------


def qdrant_store(**over: Any) -> dict[str, Any]:
    store: dict[str, Any] = {
        "backend": "qdrant",
        "index": "docs",
        "connection": {"url": "http://127.0.0.1:6333"},
        "mapping": {"content": "body"},
        "search": {"sparse_vector": "text-sparse"},
    }
    store.update(over)
    return store


def os_store(**over: Any) -> dict[str, Any]:
    return es_store(backend="opensearch", **over)


def refusal(store: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config({"stores": {"docs": store}})
    message = str(info.value)
    assert message.count("\n") == 0, message  # one line: the one key at fault
    # The backend tag pydantic puts in the path never shows: the path is the YAML's.
    assert "docs.qdrant." not in message
    assert "docs.elasticsearch." not in message
    assert "docs.opensearch." not in message
    return message


def test_a_qdrant_store_refuses_aws_sigv4() -> None:
    conn = {"url": "http://q:6333", "aws_sigv4": {"region": "eu-west-1"}}
    assert refusal(qdrant_store(connection=conn)) == (
        "invalid config: stores.docs.connection.aws_sigv4: does not apply to backend qdrant "
        "(a key of opensearch stores)"
    )


@pytest.mark.parametrize(
    ("conn", "ending"),
    [
        (
            {"url": "http://q:6333", "api_key": "k", "access_token": "t"},
            "connection: choose one of api_key, access_token",
        ),
        (
            {"path": "/var/q", "prefer_grpc": True, "api_key": "k"},
            "connection: api_key, prefer_grpc apply to a qdrant server (url) only",
        ),
        (
            {"url": "https://q:6333", "prefer_grpc": True, "verify_certs": False},
            "connection: verify_certs false is for REST only (gRPC always checks TLS)",
        ),
        ({"url": "http://q:6333", "grpc_port": 70000}, "less than 65536"),
    ],
)
def test_a_qdrant_server_connection_is_consistent(conn: dict[str, Any], ending: str) -> None:
    message = refusal(qdrant_store(connection=conn))
    assert message.endswith(ending), message
    assert "'k'" not in message
    assert "'t'" not in message


def test_a_qdrant_access_token_and_grpc_reach_the_connector_spec() -> None:
    from gateway.store.connector_spec import connector_spec

    conn = {"url": "https://q:6333", "access_token": "jwt", "prefer_grpc": True, "grpc_port": 7}
    cfg = parse_config({"stores": {"docs": qdrant_store(connection=conn)}})
    spec = connector_spec(cfg.stores["docs"]).connection
    assert isinstance(spec, QdrantConnectionSpec)
    assert spec.access_token is not None
    assert spec.access_token.get_secret_value() == "jwt"
    assert "jwt" not in repr(spec)
    assert (spec.prefer_grpc, spec.grpc_port, spec.api_key) == (True, 7, None)


def test_an_elasticsearch_store_refuses_a_local_mode_path() -> None:
    conn = {"hosts": ["http://h:9200"], "path": "/var/qdrant"}
    assert refusal(es_store(connection=conn)) == (
        "invalid config: stores.docs.connection.path: does not apply to backend elasticsearch "
        "(a key of qdrant stores)"
    )


def test_an_elasticsearch_store_refuses_aws_sigv4() -> None:
    conn = {"hosts": ["http://h:9200"], "aws_sigv4": {"region": "eu-west-1"}}
    assert refusal(es_store(connection=conn)).endswith(
        "connection.aws_sigv4: does not apply to backend elasticsearch (a key of opensearch stores)"
    )


def test_an_opensearch_store_refuses_a_cloud_id() -> None:
    conn = {"hosts": ["http://h:9200"], "cloud_id": "deployment:abc"}
    message = refusal(os_store(connection=conn))
    assert message.endswith(
        "connection.cloud_id: does not apply to backend opensearch (a key of elasticsearch stores)"
    )
    assert "deployment:abc" not in message


def test_a_qdrant_store_refuses_lucene_search_keys() -> None:
    search = {"sparse_vector": "s", "text_fields": ["body"]}
    assert refusal(qdrant_store(search=search)).endswith(
        "search.text_fields: does not apply to backend qdrant "
        "(a key of elasticsearch and opensearch stores)"
    )


def test_a_lucene_store_refuses_a_sparse_vector() -> None:
    search = {"text_fields": ["body"], "sparse_vector": "s"}
    assert refusal(os_store(search=search)).endswith(
        "search.sparse_vector: does not apply to backend opensearch (a key of qdrant stores)"
    )


def test_only_a_qdrant_store_can_be_the_demo() -> None:
    assert refusal(es_store(demo={"corpus": "packaged"})).endswith(
        "stores.docs.demo: does not apply to backend elasticsearch (a key of qdrant stores)"
    )


def test_a_key_no_backend_has_is_an_unknown_key() -> None:
    conn = {"hosts": ["http://h:9200"], "client_secret": "x"}
    message = refusal(es_store(connection=conn))
    assert "stores.docs.connection.client_secret: unknown key (the keys here: api_key, " in message
    assert "cloud_id" in message


@pytest.mark.parametrize(
    ("where", "typo", "meant"),
    [
        ("search", "text_feilds", "text_fields"),
        ("mapping", "creatd_at", "created_at"),
        ("limits", "max_recal_limit", "max_recall_limit"),
    ],
)
def test_a_typo_gets_the_key_it_was_meant_to_be(where: str, typo: str, meant: str) -> None:
    section = {**(es_store().get(where) or {}), typo: ["x"] if where == "search" else 5}
    assert refusal(es_store(**{where: section})).endswith(
        f"stores.docs.{where}.{typo}: unknown key; did you mean `{meant}`?"
    )


def test_a_typo_in_the_server_section_too() -> None:
    store = es_store()
    with pytest.raises(ConfigError) as info:
        parse_config({"server": {"prot": 8081}, "stores": {"docs": store}})
    assert str(info.value) == "invalid config: server.prot: unknown key; did you mean `port`?"


def test_a_missing_backend_names_the_choices() -> None:
    store = es_store()
    del store["backend"]
    assert refusal(store) == (
        "invalid config: stores.docs.backend: must be one of elasticsearch, opensearch, qdrant"
    )


def test_each_backend_gets_its_own_model() -> None:
    from connectors.lucene.config import OpenSearchConnection
    from gateway.config.engines import (
        ElasticsearchStoreConfig,
        OpenSearchStoreConfig,
        QdrantStoreConfig,
    )

    sigv4 = {"hosts": ["https://h:443"], "aws_sigv4": {"region": "eu-west-1"}}
    cfg = parse_config(
        {
            "stores": {
                "es": es_store(),
                "os": os_store(connection=sigv4),
                "q": qdrant_store(),
            }
        }
    )
    assert isinstance(cfg.stores["es"], ElasticsearchStoreConfig)
    assert isinstance(cfg.stores["q"], QdrantStoreConfig)
    store = cfg.stores["os"]
    assert isinstance(store, OpenSearchStoreConfig)
    assert isinstance(store.connection, OpenSearchConnection)
    assert store.connection.aws_sigv4 is not None
    assert store.connection.aws_sigv4.region == "eu-west-1"


# -- validators are pure; the load step does the I/O --------------------------------------------


def test_validation_alone_reads_no_file_and_expands_nothing(tmp_path: Path) -> None:
    """The models take values as given: `${...}` and api_keys_file are the load step's."""
    from gateway.config import GatewayConfig

    missing = tmp_path / "absent.yaml"
    data = {
        "server": {"auth": {"api_keys_file": str(missing)}},
        "stores": {"docs": es_store(description="${file:/nonexistent/secret}")},
    }
    cfg = GatewayConfig.model_validate(data)
    assert cfg.stores["docs"].description == "${file:/nonexistent/secret}"
    assert cfg.server.auth.all_api_keys() == []
    with pytest.raises(ConfigError, match=r"stores\.docs\.description: secret file"):
        parse_config(data)
    del data["stores"]["docs"]["description"]
    with pytest.raises(ConfigError, match=r"server\.auth: auth\.api_keys_file cannot be read"):
        parse_config(data)


def test_a_missing_embedder_extra_is_found_by_the_load_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway.config import EmbedderConfig
    from gateway.embedders import minilm_extra

    monkeypatch.setattr(minilm_extra, "available_weights", lambda: [])
    assert EmbedderConfig(kind="minilm").kind == "minilm"  # the model checks values only
    store = qdrant_store(
        connection={"path": str(tmp_path / "q")},
        search={"mode": "dense", "embedder": {"kind": "minilm"}},
    )
    with pytest.raises(ConfigError) as info:
        parse_config({"stores": {"docs": store}})
    assert str(info.value) == (
        "invalid config: stores.docs.search.embedder: embedder.kind 'minilm' needs the extra: "
        + extra_command("minilm")
    )


def test_a_relative_qdrant_path_is_relative_to_the_config_file(tmp_path: Path) -> None:
    from connectors.qdrant.config import QdrantConnection

    (tmp_path / "conf").mkdir()
    path = tmp_path / "conf" / "gateway.yaml"
    store = qdrant_store(connection={"path": "data/qdrant"})
    path.write_text(yaml.safe_dump({"stores": {"docs": store}}))
    connection = load_config(path).stores["docs"].connection
    assert isinstance(connection, QdrantConnection)
    assert connection.path == str((tmp_path / "conf" / "data" / "qdrant").resolve())


def test_unset_candidates_search_100_and_fuse_legs_of_twice_the_limit() -> None:
    store = _hybrid_store()
    assert store.search.candidates is None
    assert store.search.knn_candidates == 100
    assert store.search.fusion_depth(10) == 20
    assert store.search.fusion_depth(7) == 14
    # Never deeper than the 100 of before; a page deeper than that is its own depth.
    assert store.search.fusion_depth(60) == 100
    assert store.search.fusion_depth(300) == 300


def test_set_candidates_are_the_knn_breadth_and_the_leg_depth() -> None:
    store = _hybrid_store(candidates=30)
    assert store.search.knn_candidates == 30
    assert store.search.fusion_depth(10) is None  # the connector uses candidates


def _hybrid_store(**search: Any) -> Any:
    raw = {
        "backend": "elasticsearch",
        "index": "i",
        "connection": {"hosts": ["http://127.0.0.1:9"]},
        "mapping": {"content": "content"},
        "search": {"mode": "lexical", "text_fields": ["content"], "vector_field": "v", **search},
    }
    return parse_config({"stores": {"s": raw}}).stores["s"]


def _with_rate_limit(rate_limit: dict[str, Any]) -> dict[str, Any]:
    return {"server": {"rate_limit": rate_limit}, "stores": {"docs": es_store()}}


@pytest.mark.parametrize(
    ("rate_limit", "message"),
    [
        (
            {"requests_per_second": 5, "backend": "redis"},
            "rate_limit.backend redis needs rate_limit.redis.url",
        ),
        (
            {"requests_per_second": 5, "redis": {"url": "redis://cache:6379/0"}},
            "rate_limit.redis applies to backend redis only",
        ),
        (
            {
                "requests_per_second": 5,
                "backend": "redis",
                "redis": {"url": "redis://:hunter2-in-the-url@cache:6379/0"},
            },
            "must not hold a password",
        ),
        (
            {
                "requests_per_second": 5,
                "backend": "redis",
                "redis": {"url": "redis://cache:6379/0", "ca_certs": "/ca.pem"},
            },
            "ca_certs applies to rediss:// only",
        ),
        (
            {"requests_per_second": 5, "backend": "redis", "redis": {"url": "http://cache"}},
            "rate_limit.redis.url",
        ),
    ],
    ids=["no_redis", "redis_without_backend", "password_in_url", "ca_without_tls", "not_redis"],
)
def test_a_shared_rate_limit_is_refused_when_inconsistent(
    rate_limit: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(_with_rate_limit(rate_limit))
    assert message in str(err.value)
    assert "hunter2" not in str(err.value)


def test_a_shared_rate_limit_takes_its_password_from_a_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("A2M_TEST_REDIS_PASSWORD", "from-the-environment")
    rate = parse_config(
        _with_rate_limit(
            {
                "requests_per_second": 5,
                "backend": "redis",
                "redis": {"url": "rediss://cache:6380/1", "password": "${A2M_TEST_REDIS_PASSWORD}"},
            }
        )
    ).server.rate_limit
    assert rate is not None
    assert rate.redis is not None
    assert rate.redis.password is not None
    assert rate.redis.password.get_secret_value() == "from-the-environment"
    assert "from-the-environment" not in repr(rate)
    assert (rate.redis.on_error, rate.redis.timeout_ms) == ("local", 100)
