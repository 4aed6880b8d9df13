"""tests/engines/engines.py's node table and JDK choice, on this machine's real JDKs."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tests.engines.manager.commands import startable_here
from tests.engines.manager.jdk import java_home, jdk_major
from tests.engines.manager.keycloak import keycloak_home
from tests.engines.manager.nodes import DEFAULT_NAMES, NODES, QDRANT, EngineError
from tests.engines.manager.qdrant import qdrant_config, qdrant_settings
from tests.engines.manager.state import load_state

SCRIPT = Path(__file__).resolve().with_name("engines.py")


@pytest.fixture(scope="module")
def engines() -> ModuleType:
    spec = importlib.util.spec_from_file_location("a2m_engines_script", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_node_has_its_own_port_range_and_variable() -> None:
    nodes = NODES.values()
    assert set(NODES) == {
        "opensearch",
        "elasticsearch",
        "opensearch3",
        "elasticsearch9",
        "keycloak",
        "qdrant",
    }
    assert len({n.base_port // 100 for n in nodes}) == 6
    assert len({n.env_var for n in nodes}) == 6
    assert NODES["keycloak"].env_var == "A2M_TEST_KEYCLOAK_URL"
    assert NODES["qdrant"].env_var == "A2M_TEST_QDRANT_URL"
    # The names the suite and the older docs use stay as they were.
    assert NODES["opensearch"].env_var == "A2M_TEST_OPENSEARCH_URL"
    assert NODES["elasticsearch"].env_var == "A2M_TEST_ELASTICSEARCH_URL"
    assert DEFAULT_NAMES == ("opensearch", "elasticsearch")


def test_keycloak_imports_the_realm_file_under_two_issuers(tmp_path: Path) -> None:
    kc_home = tmp_path / "dist" / "keycloak-x"
    for sub in ("bin", "lib/lib/main", "lib/quarkus", "data"):
        (kc_home / sub).mkdir(parents=True)
    (kc_home / "lib" / "lib" / "main" / "a.jar").write_bytes(b"jar")
    home = keycloak_home(kc_home, tmp_path / "run")
    realms = sorted(p.name for p in (home / "data" / "import").iterdir())
    assert realms == ["a2m-other.json", "a2m.json"]
    for name in ("a2m", "a2m-other"):
        text = (home / "data" / "import" / f"{name}.json").read_text()
        assert f'"realm": "{name}"' in text
    # The jars are shared with the cached distribution, not copied.
    assert (home / "lib" / "lib" / "main" / "a.jar").stat().st_ino == (
        kc_home / "lib" / "lib" / "main" / "a.jar"
    ).stat().st_ino


def test_version_override(monkeypatch: pytest.MonkeyPatch) -> None:
    node = NODES["elasticsearch9"]
    monkeypatch.setenv("A2M_ENGINES_ELASTICSEARCH9_VERSION", "9.2.0")
    assert node.version == "9.2.0"
    monkeypatch.delenv("A2M_ENGINES_ELASTICSEARCH9_VERSION")
    assert node.version == node.default_version


def test_each_node_gets_a_jdk_new_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("A2M_ENGINES_JAVA_HOME", "A2M_ENGINES_JAVA17_HOME", "A2M_ENGINES_JAVA21_HOME"):
        monkeypatch.delenv(var, raising=False)
    for node in NODES.values():
        if node.kind == QDRANT:
            continue  # a native binary: no JVM
        try:
            jdk = java_home(node.min_java)
        except EngineError as exc:
            pytest.fail(f"{node.name}: {exc}")
        major = jdk_major(jdk)
        assert major is not None, jdk
        assert major >= node.min_java, (node.name, jdk)
    with pytest.raises(EngineError, match="no JDK 999"):
        java_home(999)


def test_a_missing_qdrant_binary_fails_start(
    engines: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("A2M_ENGINES_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("A2M_QDRANT_BIN", str(tmp_path / "no-such-qdrant"))
    assert engines.main(["start", "--only", "qdrant"]) == 1
    assert load_state() == {}
    monkeypatch.delenv("A2M_QDRANT_BIN")
    assert engines.main(["start", "--only", "qdrant"]) == 1
    assert load_state() == {}


def test_start_all_passes_over_qdrant_unless_a_binary_is_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("A2M_QDRANT_BIN", raising=False)
    assert startable_here() == [n for n in NODES if n != QDRANT]
    binary = tmp_path / "qdrant"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.setenv("A2M_QDRANT_BIN", str(binary))
    assert startable_here() == list(NODES)


def test_the_qdrant_config_binds_loopback_with_keys_and_jwt(tmp_path: Path) -> None:
    import yaml

    settings = qdrant_settings(tmp_path, 19650, fresh=True)
    config = yaml.safe_load(qdrant_config(tmp_path, settings))
    service = config["service"]
    assert service["host"] == "127.0.0.1"
    assert (service["http_port"], service["grpc_port"]) == (19650, settings["grpc_port"])
    assert service["grpc_port"] != 19650
    assert service["api_key"] == settings["api_key"] != service["read_only_api_key"]
    assert service["jwt_rbac"] is True
    assert config["storage"]["storage_path"] == str(tmp_path / "storage")
    assert config["storage"]["snapshots_path"] == str(tmp_path / "snapshots")
    # A restart keeps the ports and keys; a fresh start draws new keys.
    assert qdrant_settings(tmp_path, 19650, fresh=False) == settings
    assert qdrant_settings(tmp_path, 19650, fresh=True)["api_key"] != settings["api_key"]
