"""Fixtures of the security tests: one identity provider per session."""

from __future__ import annotations

import pytest

from tests.security.support import Issuer


@pytest.fixture(scope="session")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> Issuer:
    return Issuer.create(tmp_path_factory.mktemp("idp"))
