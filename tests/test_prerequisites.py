"""A missing engine or SciFact file skips on a developer's machine and fails under CI."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SCIFACT_FILES, missing, scifact_missing, scifact_where


@pytest.mark.parametrize(
    ("env", "outcome"),
    [
        ({}, pytest.skip.Exception),
        ({"CI": "true"}, pytest.fail.Exception),
        ({"CI": "1"}, pytest.fail.Exception),
        ({"CI": "false"}, pytest.skip.Exception),
        ({"A2M_REQUIRE_ENGINES": "1"}, pytest.fail.Exception),
    ],
    ids=["developer", "ci-true", "ci-1", "ci-false", "require-engines"],
)
def test_missing_skips_or_fails(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], outcome: type[BaseException]
) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("A2M_REQUIRE_ENGINES", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(outcome, match="SciFact"):
        missing("SciFact not found")


def test_every_scifact_file_is_checked(tmp_path: Path) -> None:
    assert scifact_missing(tmp_path) == list(SCIFACT_FILES)
    for name in SCIFACT_FILES[:-1]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert scifact_missing(tmp_path) == [SCIFACT_FILES[-1]]


def test_the_scifact_message_names_no_path_outside_the_repository() -> None:
    outside = str(Path(__file__).resolve().parents[2])  # the checkout's parent directory
    default = scifact_where(None)
    assert outside not in default
    assert "../shared/data/scifact" in default
    assert "A2M_SCIFACT_DIR" in default
    assert scifact_where("/data/scifact") == "A2M_SCIFACT_DIR=/data/scifact"
