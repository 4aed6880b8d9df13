"""The embedded demo store: a small corpus shipped in the package, indexed into Qdrant in process.

``gateway/demo/corpus/*.md`` are short documents about A2M and this gateway.
Each ``##`` section becomes one chunk (one point) with ``content`` (the
section's text), ``title`` (the document's and the section's heading, which
also leads the indexed text), ``uri`` (a relative reference to the
section, ``gateway/demo/corpus/recall.md#limits``), ``media_type``
(``text/markdown``), ``key`` (``demo/<file>/<section>``), ``group`` (the
file's stem) and ``created_at`` (deterministic, distinct per chunk). A section may
hold one ``<!-- search: ... -->`` line, hidden wherever the markdown is rendered and
never returned: the words a reader asks with that the section's own text does not use
(a newcomer's "download a link" for "fetch a uri"); they are indexed in both legs
between the title and the text. Chunks
carry a lexical sparse vector (:class:`LexicalSparseEncoder`, with the
collection's IDF modifier) and, when the ``minilm`` extra is installed, an
all-MiniLM-L6-v2 dense vector: the store is then hybrid, else lexical (its
description says which). Nothing is downloaded either way. The store has
``search.passages`` on: a section longer than 600 characters (recall.md has one)
is recalled as its passages, and says where they sit.

The engine is Qdrant's own, in this process (qdrant-edge): :func:`ensure_demo_index`
indexes the corpus at start into a shard (in memory: each gateway process writes its
own in a private temporary directory, so no two processes contend for a shard's lock);
the store then opens the collection through the ordinary Qdrant connector.
:func:`default_demo_config` is the demo store's config built in code;
``config/demo.yaml`` is the same config as a file.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path

from connectors.qdrant.config import QdrantConnection
from gateway.config import (
    DemoConfig,
    EmbedderConfig,
    EmbedderKind,
    GatewayConfig,
    MappingConfig,
    SearchMode,
)
from gateway.config.engines import QdrantSearchConfig, QdrantStoreConfig
from gateway.stages.config import PassagesConfig

DEMO_STORE = "demo"
DEMO_INDEX = "a2m-demo"
DEMO_SPARSE_VECTOR = "text-sparse"
DEMO_DENSE_VECTOR = "minilm"
CORPUS_URI_BASE = "gateway/demo/corpus"
MEDIA_TYPE = "text/markdown"
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
"""created_at of the first chunk; each next chunk is one minute later."""

_FINGERPRINT = "corpus_sha"
"""Payload field (never mapped, so never returned) that records which corpus was indexed."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One section of one corpus document."""

    key: str
    group: str
    title: str
    uri: str
    content: str
    created_at: str
    search_terms: str = ""
    """The section's ``<!-- search: ... -->`` line: the words a reader asks with that the
    text does not use. Indexed in both legs with the title and content, never returned."""


_SEARCH_TERMS = re.compile(r"<!--\s*search:(.*?)-->")
"""A section's search terms: a markdown comment, so no rendering of the file shows it."""


def _slug(heading: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-") or "section"


def corpus_files() -> list[tuple[str, str]]:
    """(file stem, markdown text) of every packaged corpus document, sorted by name."""
    root = resources.files("gateway.demo").joinpath("corpus")
    files = sorted((entry.name, entry) for entry in root.iterdir() if entry.name.endswith(".md"))
    return [(name[: -len(".md")], entry.read_text(encoding="utf-8")) for name, entry in files]


def chunks() -> list[Chunk]:
    """Every section of the packaged corpus, in file then section order."""
    out: list[Chunk] = []
    for stem, text in corpus_files():
        doc_title = stem
        sections: list[tuple[str, list[str], list[str]]] = []
        for line in text.splitlines():
            if line.startswith("# ") and not sections:
                doc_title = line[2:].strip()
            elif line.startswith("## "):
                sections.append((line[3:].strip(), [], []))
            elif sections and (hidden := _SEARCH_TERMS.fullmatch(line.strip())):
                sections[-1][2].append(hidden.group(1).strip())
            elif sections:
                sections[-1][1].append(line)
        seen: set[str] = set()
        for heading, body, terms in sections:
            slug = _slug(heading)
            while slug in seen:  # two sections with one heading still get distinct keys
                slug += "-2"
            seen.add(slug)
            out.append(
                Chunk(
                    key=f"demo/{stem}/{slug}",
                    group=stem,
                    title=f"{doc_title}: {heading}",
                    uri=f"{CORPUS_URI_BASE}/{stem}.md#{slug}",
                    # The heading is the title's; in content too it would be read twice
                    # wherever a title and its content are shown together (prompt, MCP).
                    content="\n".join(body).strip(),
                    created_at=(EPOCH + timedelta(minutes=len(out))).strftime(
                        "%Y-%m-%dT%H:%M:%S.000Z"
                    ),
                    search_terms=" ".join(terms),
                )
            )
    return out


def fingerprint(items: list[Chunk], analyzer: str = "light") -> str:
    """Which corpus, encoded how: an on-disk collection with another fingerprint is rebuilt."""
    digest = hashlib.sha256(analyzer.encode())
    for c in items:
        digest.update(
            repr((c.key, c.title, c.uri, c.content, c.created_at, c.search_terms)).encode()
        )
    return digest.hexdigest()[:16]


def default_demo_config(data_dir: Path | None = None, hybrid: bool | None = None) -> GatewayConfig:
    """The demo gateway config: one Qdrant store ``demo``.

    Without ``data_dir`` (the CLI, ``config/demo.yaml``) the store is held in
    memory and indexed by each process at start, so any number of gateway
    processes serve the demo at once. With ``data_dir`` it lives on disk at
    ``data_dir / "qdrant"``, indexed once and locked by one process.

    hybrid: None picks hybrid (lexical + all-MiniLM-L6-v2) when the ``minilm`` extra is
    installed, lexical otherwise. ``config/demo.yaml`` is the lexical config as a file
    (its path is relative to it).
    """
    from gateway.embedders.minilm_extra import missing_message

    if hybrid is None:
        hybrid = missing_message("auto") is None
    where = "in memory" if data_dir is None else "on disk"
    about = (
        f"Documentation of A2M and this gateway, packaged as a demo (Qdrant in process, {where})"
    )
    if hybrid:
        about += "; hybrid search: lexical and all-MiniLM-L6-v2, computed on this machine"
        search = QdrantSearchConfig(
            mode=SearchMode.HYBRID,
            sparse_vector=DEMO_SPARSE_VECTOR,
            sparse_analyzer="english",
            vector_field=DEMO_DENSE_VECTOR,
            embedder=EmbedderConfig(kind=EmbedderKind.MINILM),
            passages=PassagesConfig(),
        )
    else:
        about += (
            "; lexical search only (words, not meaning); with the gateway's minilm extra, "
            "the demo served without --config is hybrid"
        )
        search = QdrantSearchConfig(
            mode=SearchMode.LEXICAL,
            sparse_vector=DEMO_SPARSE_VECTOR,
            sparse_analyzer="english",
            passages=PassagesConfig(),
        )
    store = QdrantStoreConfig(
        backend="qdrant",
        index=DEMO_INDEX,
        description=about,
        connection=QdrantConnection(location=":memory:")
        if data_dir is None
        else QdrantConnection(path=str(data_dir / "qdrant")),
        mapping=MappingConfig(
            content="content",
            uri="uri",
            media_type="media_type",
            key="key",
            group="group",
            created_at="created_at",
            metadata=["title"],
        ),
        search=search,
        demo=DemoConfig(corpus="packaged"),
    )
    return GatewayConfig(stores={DEMO_STORE: store})


# The indexer (gateway/demo/index.py) reads the names above.
from gateway.demo.index import demo_points, embed_chunks, ensure_demo_index  # noqa: E402

__all__ = [
    "DEMO_STORE",
    "Chunk",
    "chunks",
    "default_demo_config",
    "demo_points",
    "embed_chunks",
    "ensure_demo_index",
]
