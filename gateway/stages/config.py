"""Config of the stages after retrieval (``search.passages``, ``search.per_group``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_MAX_CHARS = 600
"""Characters of passage text per record when ``search.passages.max_chars`` is unset."""


class PassagesConfig(BaseModel):
    """``search.passages``: a recalled record's content is the passage that answers.

    The passage is chosen from the record's mapped content: by the engine's highlighter
    on Elasticsearch and OpenSearch (a store with one ``mapping.content`` field), else
    by the gateway, sentence windows (or paragraphs) scored against the query's terms.
    ``memory/fetch`` still returns the whole document; a recalled record says where its
    passage sits (``metadata.passage``).
    """

    # As gateway.config.base.StrictModel (not imported: gateway.config imports this module).
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    max_chars: int = Field(
        default=DEFAULT_MAX_CHARS,
        ge=80,
        le=100_000,
        description="characters of passage text per record, all passages together",
    )
    count: int = Field(
        default=4, ge=1, le=10, description="passages per record (the best, in text order)"
    )
    unit: str = Field(
        default="sentence",
        pattern="^(sentence|paragraph)$",
        description="what a window is made of: sentences, or paragraphs (blank-line separated)",
    )
    rank: bool | None = Field(
        default=None,
        description="re-order the page by each record's best paragraph (BM25 over the "
        "page's such paragraphs), fused by reciprocal rank with the engine's order; a "
        "page keeps its order unless each of its records holds two paragraphs or more of "
        "at least 150 characters. "
        "Unset: on, except where search.nested_passages has the engine rank each "
        "document by its best passage already",
    )
    by: Literal["engine", "gateway"] = Field(
        default="engine",
        description="engine: the engine's highlighter chooses the passages where it can "
        "(Elasticsearch and OpenSearch, one mapping.content field; sentences, unit "
        "ignored), the gateway elsewhere; gateway: the gateway always",
    )

    def ranks(self, engine_ranks_by_passage: bool = False) -> bool:
        """Whether the page is re-ordered: ``rank`` when set; unset, on unless the engine
        already ranks each document by its best passage (``engine_ranks_by_passage``)."""
        return self.rank if self.rank is not None else not engine_ranks_by_passage
