"""What every engine's config models share: strictness, and the keys every connection has.

An engine's package (``connectors/<engine>/config.py``) holds its ``connection:``
model, a subclass of :class:`EngineConnection`; the gateway's store models take
it from the registry (:mod:`connectors.registry`). These models import nothing of
the gateway: their ``spec()`` is the connector's plain connection spec, a
:class:`ConnectionSpec` of the engine's own (``connectors/<engine>/spec.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from connectors.spec import ConnectionSpec, Secret


def secret(value: SecretStr | None) -> Secret | None:
    """A config secret as the connector's :class:`Secret` (its repr never shows it)."""
    return Secret(value.get_secret_value()) if value is not None else None


class StrictModel(BaseModel):
    """Unknown keys are refused (a typo must not silently mean a default) and values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class EngineConnection(StrictModel):
    """Timeouts, pool and retries: every engine's ``connection:`` has them."""

    timeout_ms: int = Field(default=10_000, gt=0)
    pool_maxsize: int = Field(default=32, gt=0)
    retries: int = Field(default=3, ge=0, le=10)

    @property
    def local(self) -> bool:
        """The engine runs in this process (opened at start, off the event loop)."""
        return False

    def one_process_only(self) -> str | None:
        """Why only one process may open this engine at once (``serve --workers`` is
        refused, the reason completing "<stores> ..."); None: any number may."""
        return None

    def relative_to(self, base_dir: Path) -> Self:
        """These keys with any relative file path made relative to ``base_dir`` (the
        config file's folder); ``self`` when nothing changes."""
        return self

    def target(self) -> str | None:
        """Where the engine is, for logs and ``check`` (no credential); None: its hosts."""
        return None

    def urls(self) -> list[str]:
        """The engine's URLs as configured (they may carry userinfo: strip before showing)."""
        return []

    def spec(self) -> ConnectionSpec:
        """The connector's view of these keys (plain values, secrets wrapped): an engine
        returns its own subclass, which its connector reads."""
        return ConnectionSpec(
            timeout_ms=self.timeout_ms, pool_maxsize=self.pool_maxsize, retries=self.retries
        )


class EngineSearchKeys(StrictModel):
    """An engine's own ``search:`` keys, mixed into the store's search model (whose
    shared keys, ``mode`` and ``vector_field`` among them, the gateway owns)."""

    def check_keys(
        self, mode: str, *, lexical: bool, dense: bool, vector_field: str | None
    ) -> None:
        """Refuse a mode this engine cannot serve with these keys.

        Raises:
            ValueError: a key the mode needs is missing (the message names it).
        """

    def spec_keys(self) -> dict[str, Any]:
        """This engine's :class:`connectors.spec.SearchSpec` fields from its keys."""
        return {}
