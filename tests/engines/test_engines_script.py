"""tests/engines/engines.py's node table and JDK choice, on this machine's real JDKs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().with_name("engines.py")


@pytest.fixture(scope="module")
def engines() -> ModuleType:
    spec = importlib.util.spec_from_file_location("a2m_engines_script", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def test_each_node_has_its_own_port_range_and_variable(engines: ModuleType) -> None:
    nodes = engines.NODES.values()
    assert set(engines.NODES) == {
        "opensearch",
        "elasticsearch",
        "opensearch3",
        "elasticsearch9",
        "keycloak",
    }
    assert len({n.base_port // 100 for n in nodes}) == 5
    assert len({n.env_var for n in nodes}) == 5
    assert engines.NODES["keycloak"].env_var == "A2M_TEST_KEYCLOAK_URL"
    # The names the suite and the older docs use stay as they were.
    assert engines.NODES["opensearch"].env_var == "A2M_TEST_OPENSEARCH_URL"
    assert engines.NODES["elasticsearch"].env_var == "A2M_TEST_ELASTICSEARCH_URL"
    assert engines.DEFAULT_NAMES == ("opensearch", "elasticsearch")


def test_keycloak_imports_the_realm_file_under_two_issuers(
    engines: ModuleType, tmp_path: Path
) -> None:
    kc_home = tmp_path / "dist" / "keycloak-x"
    for sub in ("bin", "lib/lib/main", "lib/quarkus", "data"):
        (kc_home / sub).mkdir(parents=True)
    (kc_home / "lib" / "lib" / "main" / "a.jar").write_bytes(b"jar")
    home = engines.keycloak_home(kc_home, tmp_path / "run")
    realms = sorted(p.name for p in (home / "data" / "import").iterdir())
    assert realms == ["a2m-other.json", "a2m.json"]
    for name in ("a2m", "a2m-other"):
        text = (home / "data" / "import" / f"{name}.json").read_text()
        assert f'"realm": "{name}"' in text
    # The jars are shared with the cached distribution, not copied.
    assert (home / "lib" / "lib" / "main" / "a.jar").stat().st_ino == (
        kc_home / "lib" / "lib" / "main" / "a.jar"
    ).stat().st_ino


def test_version_override(engines: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    node = engines.NODES["elasticsearch9"]
    monkeypatch.setenv("A2M_ENGINES_ELASTICSEARCH9_VERSION", "9.2.0")
    assert node.version == "9.2.0"
    monkeypatch.delenv("A2M_ENGINES_ELASTICSEARCH9_VERSION")
    assert node.version == node.default_version


def test_each_node_gets_a_jdk_new_enough(
    engines: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("A2M_ENGINES_JAVA_HOME", "A2M_ENGINES_JAVA17_HOME", "A2M_ENGINES_JAVA21_HOME"):
        monkeypatch.delenv(var, raising=False)
    for node in engines.NODES.values():
        try:
            jdk = engines.java_home(node.min_java)
        except engines.EngineError as exc:
            pytest.fail(f"{node.name}: {exc}")
        major = engines.jdk_major(jdk)
        assert major is not None, jdk
        assert major >= node.min_java, (node.name, jdk)
    with pytest.raises(engines.EngineError, match="no JDK 999"):
        engines.java_home(999)
