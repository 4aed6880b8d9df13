"""`a2m-gateway check` against real nodes: the onboarding preview shows mapped records."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.connectors.conftest import Loaded

pytestmark = [pytest.mark.integration]


def _check(tmp_path: Path, config: dict[str, Any]) -> tuple[Any, str]:
    """`a2m-gateway check` on ``config`` in a real process: its JSON and stderr once it exits 0."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run(
        [sys.executable, "-m", "gateway", "check", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


@pytest.mark.parametrize(
    "engine",
    [
        pytest.param("opensearch", marks=pytest.mark.opensearch),
        pytest.param("elasticsearch", marks=pytest.mark.elasticsearch),
    ],
)
def test_check_prints_describe_and_three_mapped_records(
    engine: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    loaded: Loaded = request.getfixturevalue("os_loaded" if engine == "opensearch" else "es_loaded")
    config = {
        "stores": {
            "scifact": {
                "backend": engine,
                "index": loaded.index,
                "connection": {"hosts": [loaded.url]},
                "mapping": {
                    "id": "doc_id",
                    "content_template": "{title}\n\n{text}",
                    "key": "key",
                    "group": "group",
                    "created_at": "created_at",
                },
                "search": {
                    "mode": "lexical",
                    "text_fields": ["title^2", "text"],
                    "vector_field": "embedding",
                },
            }
        }
    }
    out, stderr = _check(tmp_path, config)
    assert out["ok"] is True
    describe = out["describe"]
    assert describe["capabilities"] == ["core", "keys", "embeddings", "prompt"]
    assert describe["embeddings"]["dimensions"] == 384
    assert describe["embeddings"]["metric"] == "cosine"
    sample = out["sample"]
    assert len(sample) == 3
    stamps = [r["created_at"] for r in sample]
    assert stamps == sorted(stamps, reverse=True), "the preview shows the newest records"
    for record in sample:
        assert record["id"] in loaded.sf.corpus_ids
        assert record["key"] == f"scifact/{record['id']}"
        assert "\n\n" in record["content"]
        # Only mapped fields leave the gateway: the index's `acl` field is not one of them.
        assert set(record) == {"id", "content", "key", "group", "created_at"}
    assert "warnings" not in out, "created_at is mapped: nothing to warn about"
    assert "created_at_fallback" not in stderr


@pytest.mark.parametrize(
    "engine",
    [
        pytest.param("opensearch", marks=pytest.mark.opensearch),
        pytest.param("elasticsearch", marks=pytest.mark.elasticsearch),
    ],
)
def test_check_warns_when_records_take_the_created_at_fallback(
    engine: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """§3.1 requires created_at; a store mapping no date field names a fallback, and
    `check` says that every record carries it and what timeline order then means."""
    loaded: Loaded = request.getfixturevalue("os_loaded" if engine == "opensearch" else "es_loaded")
    config = {
        "stores": {
            "undated": {
                "backend": engine,
                "index": loaded.index,
                "connection": {"hosts": [loaded.url]},
                "mapping": {
                    "id": "doc_id",
                    "content": "text",
                    "created_at_fallback": "2020-01-01T00:00:00Z",
                },
                "search": {"mode": "lexical", "text_fields": ["text"]},
            }
        }
    }
    out, stderr = _check(tmp_path, config)
    assert out["ok"] is True
    (warning,) = out["warnings"]
    assert "mapping.created_at_fallback" in warning
    assert "timeline order" in warning
    assert "mapping.created_at_fallback" in stderr, "logged as a warning too"
    assert [r["created_at"] for r in out["sample"]] == ["2020-01-01T00:00:00.000Z"] * 3
