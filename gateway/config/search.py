"""How a store searches: the mode, the query embedder, and each engine's own search keys."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field, SecretStr, model_validator

from connectors.base import Fusion
from connectors.config import EngineSearchKeys
from gateway.config.base import StrictModel
from gateway.stages.config import PassagesConfig

DEFAULT_CANDIDATES = 100
"""kNN breadth, Qdrant prefetch and federation member depth when ``candidates`` is unset."""
DEFAULT_FUSION: Fusion = "zscore"
"""``search.fusion`` when unset (docs/configuration.md, "Hybrid fusion")."""
FUSION_DEPTH_PER_RESULT = 2
"""Hits per Lucene hybrid leg per requested result when ``candidates`` is unset."""


class SearchMode(StrEnum):
    LEXICAL = "lexical"
    """BM25 multi_match on Elasticsearch/OpenSearch; a sparse vector on Qdrant."""
    DENSE = "dense"
    """kNN on the vector field, the query embedded by the store's embedder."""
    HYBRID = "hybrid"
    """Lexical and dense fused by reciprocal rank fusion."""


class EmbedderKind(StrEnum):
    NONE = "none"
    LOCAL = "local"
    """A sentence-transformers model (torch): the ``local-embeddings`` extra."""
    MINILM = "minilm"
    """all-MiniLM-L6-v2 without torch or a download: the ``minilm`` extra."""
    OPENAI = "openai"


class EmbedderConfig(StrictModel):
    """How query text becomes a dense vector; must match how the corpus was embedded.

    Whether the chosen kind's extra is installed is checked by the load step
    (gateway.config.load), not here: a validator looks only at the values.
    """

    kind: EmbedderKind = EmbedderKind.NONE
    model: str | None = None
    url: str | None = Field(default=None, description="OpenAI-compatible base URL (…/v1)")
    api_key: SecretStr | None = None
    dimensions: int | None = Field(default=None, gt=0)
    timeout_ms: int = Field(default=5000, gt=0)
    normalize: bool = True
    weights: Literal["auto", "fp32", "int8"] = Field(
        default="auto", description="kind minilm: auto = fp32 when installed, else int8"
    )

    @model_validator(mode="after")
    def _needs(self) -> EmbedderConfig:
        if self.kind is EmbedderKind.LOCAL and not self.model:
            raise ValueError("embedder.kind 'local' needs embedder.model")
        if self.kind is EmbedderKind.MINILM:
            from gateway.embedders.minilm_extra import DIMENSIONS, MODEL_ALIASES

            if self.model is not None and self.model not in MODEL_ALIASES:
                raise ValueError("embedder.kind 'minilm' runs all-MiniLM-L6-v2 only")
            if self.dimensions is not None and self.dimensions != DIMENSIONS:
                raise ValueError(f"embedder.kind 'minilm' makes {DIMENSIONS} dimensions")
            if not self.normalize:
                raise ValueError("embedder.kind 'minilm' always normalises (as the model does)")
        if self.kind is EmbedderKind.OPENAI and not (self.url and self.model):
            raise ValueError("embedder.kind 'openai' needs embedder.url and embedder.model")
        return self


class SearchConfig(EngineSearchKeys):
    """The search keys every backend reads; each backend's model adds its own."""

    mode: SearchMode = SearchMode.LEXICAL
    vector_field: str | None = None
    embedder: EmbedderConfig = Field(default_factory=EmbedderConfig)
    fusion: Fusion = Field(
        default=DEFAULT_FUSION,
        description="how hybrid fuses its legs: zscore (each leg's scores standardised over "
        "its list, then weighted and summed), minmax, dbsf, or rrf (reciprocal rank)",
    )
    question_words: Literal["drop", "keep"] = Field(
        default="keep",
        description="drop: a question's own words (how, what, do I...) are left out of the "
        "lexical leg's text (gateway.store.query_text); keep: the text as asked",
    )
    rrf_k: int = Field(default=60, gt=0)
    lexical_weight: float = Field(default=1.0, ge=0)
    dense_weight: float = Field(default=1.0, ge=0)
    candidates: int | None = Field(
        default=None,
        gt=0,
        le=10_000,
        description="kNN breadth and hybrid leg depth; unset: 100, and 2 x limit (at most "
        "100) for the hybrid legs of Elasticsearch/OpenSearch",
    )
    passages: PassagesConfig | None = Field(
        default=None,
        description="a recalled record's content is its passage that answers the query "
        "(gateway.stages.passages); unset: the whole mapped content",
    )
    per_group: int | None = Field(
        default=None, ge=1, le=1000, description="at most this many records of one group"
    )
    fold_groups: bool = Field(
        default=True,
        description="with per_group: a record the cap leaves out that ranked within the "
        "first limit is folded into its group's best record (its text appended to the "
        "content, metadata.chunks saying where; with passages, within max_chars); "
        "false: it is dropped",
    )

    @property
    def knn_candidates(self) -> int:
        """How many neighbours a kNN search (and a Qdrant prefetch) considers."""
        return self.candidates or DEFAULT_CANDIDATES

    @property
    def ranks_by_passage(self) -> bool:
        """The engine already ranks each document by its best passage (nested passages):
        the passage stage's rank is then off unless set."""
        return False

    def fusion_depth(self, limit: int) -> int | None:
        """Hits per Lucene hybrid leg for a page of ``limit``; None: ``knn_candidates``.

        Unset ``candidates``: ``FUSION_DEPTH_PER_RESULT`` x limit, the depth whose legs
        return their documents in one ``_msearch`` (one engine round trip), but never
        deeper than ``DEFAULT_CANDIDATES`` (the legs' depth before). Tuned on SciFact
        train at limit 10: 20 ranks like 100 (paired bootstrap, 809 queries) at about
        half the engine CPU (docs/benchmarks.md).
        """
        if self.candidates:
            return None
        return max(limit, min(FUSION_DEPTH_PER_RESULT * limit, DEFAULT_CANDIDATES))

    @property
    def uses_lexical(self) -> bool:
        return self.mode in (SearchMode.LEXICAL, SearchMode.HYBRID)

    @property
    def uses_dense(self) -> bool:
        return self.mode in (SearchMode.DENSE, SearchMode.HYBRID)

    @model_validator(mode="after")
    def _consistent(self) -> SearchConfig:
        # The keys a mode needs on this backend (each engine's search keys say which).
        self.check_keys(
            self.mode,
            lexical=self.uses_lexical,
            dense=self.uses_dense,
            vector_field=self.vector_field,
        )
        if self.uses_dense and self.embedder.kind is EmbedderKind.NONE:
            raise ValueError(
                f"search.embedder is required for mode '{self.mode}': query text must be "
                "embedded by the model the corpus was embedded with"
            )
        return self
