"""SciFact with ACLs and owners, on Elasticsearch, OpenSearch and Qdrant.

Each document gets an ``acl`` (a keyword list) and an ``owner`` from a hash of
its id, so visibility is uncorrelated with ranking:

======  ==========================  ==============
share   acl                         visible to
======  ==========================  ==============
1/6     [ALPHA, BRAVO]              A and B
2/6     [ALPHA]                     A only
2/6     [BRAVO]                     B only
1/6     [NOBODY]                    neither
======  ==========================  ==============

The ACL values are distinctive strings so a leak of the field is visible in a
response's bytes. The ES/OS index reuses :mod:`tests.support.lucene_loader`'s
mapping (with its ``acl`` keyword) plus an ``owner`` keyword; Qdrant reuses
:func:`tests.support.scifact.load_qdrant` and sets the two payload fields.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support import lucene_loader
from tests.support.lucene_loader import Engine
from tests.support.scifact import SPARSE, SciFact, load_qdrant, subset

ALPHA = "grp-alpha-7q"
BRAVO = "grp-bravo-3z"
NOBODY = "grp-nobody-0x"
OWNERS = ("alice", "bob", "carol")
INDEX = "a2m-test-scifact-acl-v1"
SCOPE = {"filters": [{"field": "acl", "claims": ["groups"]}]}
"""Every store here: a principal sees the documents whose acl names one of its groups."""


def acl_subset(sf: SciFact) -> tuple[list[str], list[str]]:
    """The queries and documents every ACL test loads (one ES/OS index serves them all)."""
    return subset(sf, n_queries=100, n_others=400)


def acl_of(doc_id: str) -> list[str]:
    h = zlib.crc32(f"acl/{doc_id}".encode()) % 6
    if h == 0:
        return [ALPHA, BRAVO]
    if h in (1, 2):
        return [ALPHA]
    if h in (3, 4):
        return [BRAVO]
    return [NOBODY]


def owner_of(doc_id: str) -> str:
    return OWNERS[zlib.crc32(f"owner/{doc_id}".encode()) % 3]


def visible(groups: Sequence[str], doc_id: str) -> bool:
    return bool(set(groups) & set(acl_of(doc_id)))


# -- Elasticsearch / OpenSearch --------------------------------------------------------------------


def _client(engine: Engine, url: str) -> Any:
    if engine == "elasticsearch":
        from elasticsearch import Elasticsearch

        return Elasticsearch(url, request_timeout=120)
    from opensearchpy import OpenSearch

    return OpenSearch(hosts=[url], timeout=120)


def _body(engine: Engine) -> dict[str, Any]:
    body = lucene_loader.index_body(engine)
    body["mappings"]["properties"]["owner"] = {"type": "keyword"}
    return body


def load_index(
    engine: Engine, url: str, sf: SciFact, doc_ids: Sequence[str], index: str = INDEX
) -> str:
    """Create and fill `index` with the documents unless it already holds exactly them.

    Raises:
        RuntimeError: the bulk load reported errors.
    """
    client = _client(engine, url)
    try:
        if client.indices.exists(index=index):
            if int(client.count(index=index)["count"]) == len(doc_ids):
                return index
            client.indices.delete(index=index)
        client.indices.create(index=index, body=_body(engine))
        rows = {d: i for i, d in enumerate(sf.corpus_ids)}
        actions = []
        for d in doc_ids:
            source = lucene_loader.source_of(sf, rows[d])
            source["acl"] = acl_of(d)
            source["owner"] = owner_of(d)
            actions.append({"_op_type": "index", "_index": index, "_id": d, "_source": source})
        if engine == "elasticsearch":
            from elasticsearch.helpers import bulk as es_bulk

            _, errors = es_bulk(client, actions, chunk_size=500)
        else:
            from opensearchpy.helpers import bulk as os_bulk

            _, errors = os_bulk(client, actions, chunk_size=500)
        if errors:
            raise RuntimeError(f"bulk load of {index} failed: {errors!r:.300}")
        client.indices.put_settings(index=index, body={"index": {"refresh_interval": None}})
        client.indices.refresh(index=index)
        return index
    finally:
        client.close()


# -- Qdrant ----------------------------------------------------------------------------------------


def load_qdrant_acl(path: Path, sf: SciFact, doc_ids: Sequence[str]) -> None:
    """SciFact in Qdrant local mode (collection ``scifact``) with acl and owner payloads."""
    from qdrant_client import QdrantClient

    load_qdrant(path, sf, doc_ids)
    groups: dict[tuple[tuple[str, ...], str], list[Any]] = defaultdict(list)
    for d in doc_ids:
        groups[(tuple(acl_of(d)), owner_of(d))].append(int(d))
    client = QdrantClient(path=str(path))
    try:
        for (acl, owner), ids in groups.items():
            client.set_payload("scifact", payload={"acl": list(acl), "owner": owner}, points=ids)
    finally:
        client.close()


# -- store configs ---------------------------------------------------------------------------------


def lucene_store(engine: str, url: str, index: str) -> dict[str, Any]:
    return {
        "backend": engine,
        "index": index,
        "connection": {"hosts": [url], "timeout_ms": 30_000},
        "mapping": {
            "id": "doc_id",
            "content": "text",
            "key": "key",
            "group": "group",
            "owner": "owner",
            "created_at": "created_at",
            "metadata": ["title"],
        },
        "search": {
            "mode": "lexical",
            "text_fields": ["title^2", "text"],
            "vector_field": "embedding",
        },
        "scope": SCOPE,
    }


def qdrant_store(path: Path) -> dict[str, Any]:
    return {
        "backend": "qdrant",
        "index": "scifact",
        "connection": {"path": str(path)},
        "mapping": {
            "content": "content",
            "key": "key",
            "group": "group",
            "owner": "owner",
            "created_at": "created_at",
            "metadata": ["title", "year"],
        },
        "search": {"mode": "lexical", "sparse_vector": SPARSE, "vector_field": "dense"},
        "scope": SCOPE,
    }
