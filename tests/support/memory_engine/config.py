"""The ``connection:`` and ``search:`` keys of a memory store."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

from pydantic import Field

from connectors.config import EngineConnection, EngineSearchKeys
from tests.support.memory_engine.spec import MemoryConnectionSpec


class MemoryConnection(EngineConnection):
    """A JSON file of documents (``[{"id": ..., "body": ..., "ts": ...}, ...]``), read at open."""

    documents: str = Field(min_length=1, description="a JSON file: a list of documents")

    @property
    def local(self) -> bool:
        return True

    def relative_to(self, base_dir: Path) -> Self:
        if Path(self.documents).is_absolute():
            return self
        return self.model_copy(update={"documents": str((base_dir / self.documents).resolve())})

    def target(self) -> str | None:
        return f"documents in {self.documents}"

    def spec(self) -> MemoryConnectionSpec:
        return MemoryConnectionSpec(
            timeout_ms=self.timeout_ms,
            pool_maxsize=self.pool_maxsize,
            retries=self.retries,
            documents=self.documents,
        )


class MemorySearchKeys(EngineSearchKeys):
    """Lexical search only: shared words between the query and ``body``."""

    def check_keys(
        self, mode: str, *, lexical: bool, dense: bool, vector_field: str | None
    ) -> None:
        if dense:
            raise ValueError(f"search.mode '{mode}': a memory store searches words only")

    def spec_keys(self) -> dict[str, Any]:
        return {}
