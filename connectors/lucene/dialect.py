"""What Elasticsearch and OpenSearch do differently, as one small value per engine.

The Lucene connector (:mod:`connectors.lucene.connector`) is one class for both
engines. It holds a :class:`Dialect`: a few facts (the vector field type, the
tie-break of ordered reads, the REST paths of the calls that differ) and a few
plain methods (make and close the client, send one request, reduce a client
exception, write the kNN clause, read the vector field's scoring). Everything
else (bodies, retries, errors, paging, fusion) is written once for both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from connectors.base import VectorInfo
from connectors.lucene.order import EngineIdOrder

if TYPE_CHECKING:
    from connectors.lucene.failures import EngineFailure
    from connectors.lucene.query import Body
    from connectors.lucene.spec import LuceneSpec

KnnScore = Callable[[float], float]
"""The engine's kNN ``_score`` for the field's similarity, mapped into [0, 1]."""


@dataclass(frozen=True, slots=True)
class PitCalls:
    """A point in time's REST calls: where it is opened (``{index}`` filled in), the key
    of its id in the answer, and how it is closed."""

    open_path: str
    id_key: str
    close_path: str
    close_body: Callable[[str], Body]


@dataclass(frozen=True, slots=True)
class VersionCall:
    """Where the engine says its version (best effort), and how to read the answer."""

    path: str
    params: Mapping[str, str]
    read: Callable[[Mapping[str, Any]], str | None]


class Dialect(Protocol):
    """One engine's side of the Lucene connector."""

    name: str
    """``elasticsearch`` or ``opensearch``: the engine's name in logs, traces and describe."""
    vector_type: str
    """The mapping type of a kNN vector field."""
    engine_id_order: EngineIdOrder
    pit: PitCalls
    version: VersionCall
    highlight_limit_key: str
    """The highlight key that bounds the characters analysed per field (a longer field
    is highlighted in its head instead of failing the search): Elasticsearch spells it
    ``max_analyzed_offset``, OpenSearch ``max_analyzer_offset``."""
    nested_knn_since: tuple[int, int] | None
    """The first version that searches vectors in a ``nested`` field (None: every version
    the connector supports does)."""

    async def make_client(self, spec: LuceneSpec) -> Any:
        """The async client for ``connection:`` (no engine request; a credential
        lookup may run on a worker thread).

        Raises:
            EngineConfigError: the settings cannot make a client (the message names the key).
        """
        ...

    async def close_client(self, client: Any) -> None: ...

    async def request(
        self,
        client: Any,
        method: str,
        path: str,
        *,
        seconds: float,
        body: Body | bytes | None = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Mapping[str, Any]:
        """One REST call through the client's transport; its decoded answer.

        ``bytes`` bodies are NDJSON (``_msearch``). ``headers`` are added to the
        client's own (a caller's ``authorization`` replaces the store's).
        Raises the client's exceptions; :meth:`classify` reduces them.
        """
        ...

    def classify(self, exc: BaseException) -> EngineFailure | None:
        """Reduce a client exception; None for anything that is not the client's."""
        ...

    def knn_clause(self, field: str, vector: list[float], k: int, filters: Sequence[Body]) -> Body:
        """The part of a ``_search`` body that asks for the ``k`` nearest documents
        under ``filters`` (merged into the translator's common body)."""
        ...

    def nested_knn_clause(
        self,
        path: str,
        field: str,
        vector: list[float],
        k: int,
        filters: Sequence[Body],
        inner_hits: Body | None,
    ) -> Body:
        """As :meth:`knn_clause` over the vectors of the ``nested`` field ``path``: each
        document ranked by its best passage, ``inner_hits`` (when given) naming it; the
        ``filters`` select parent documents."""
        ...

    def vector_scoring(self, field: Mapping[str, Any]) -> tuple[VectorInfo, KnnScore]:
        """Dimensions and metric of the vector field's mapping, and its score mapping.

        Raises:
            EngineConfigError: the field cannot be searched by kNN or its metric is unsupported.
        """
        ...
