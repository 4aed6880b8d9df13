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

import warnings
import zlib
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.conftest import QdrantServer
from tests.support import lucene_loader
from tests.support.lucene_loader import Engine, lucene_client
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
    client = lucene_client(engine, url)
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


QDRANT_SERVER_ACL = "a2m-test-sec-acl"
"""The ACL corpus's collection on the Qdrant server (``scifact`` in process)."""


def load_qdrant_acl(
    path: Path,
    sf: SciFact,
    doc_ids: Sequence[str],
    server: dict[str, Any] | None = None,
    collection: str = QDRANT_SERVER_ACL,
) -> None:
    """SciFact in Qdrant with acl and owner payloads: a qdrant-edge shard under `path` (collection
    ``scifact``), or with `server` (qdrant-client keyword arguments) the collection
    `collection` on that server, with keyword indexes on both fields."""
    from qdrant_client import models

    collection = "scifact" if server is None else collection
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # an api key over http, on loopback
        load_qdrant(path, sf, doc_ids, collection=collection, server=server)
    groups: dict[tuple[tuple[str, ...], str], list[Any]] = defaultdict(list)
    for d in doc_ids:
        groups[(tuple(acl_of(d)), owner_of(d))].append(int(d))
    client = qdrant_client_for(path, server)
    try:
        for (acl, owner), ids in groups.items():
            client.set_payload(collection, payload={"acl": list(acl), "owner": owner}, points=ids)
        if server is not None:
            for field in ("acl", "owner"):
                client.create_payload_index(
                    collection, field, models.PayloadSchemaType.KEYWORD, wait=True
                )
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


def server_client_args(server: QdrantServer) -> dict[str, Any]:
    """qdrant-client's keyword arguments for loading the test server (REST, admin key)."""
    return {
        "url": server.url,
        "api_key": server.api_key,
        "timeout": 60,
        "check_compatibility": False,
    }


def qdrant_client_for(path: Path, server: dict[str, Any] | None) -> Any:
    """A qdrant-client on the server `server` names, or qdrant-edge shards at `path`."""
    from qdrant_client import QdrantClient

    from tests.support.edge_client import EdgeWriter

    if server is None:
        return EdgeWriter(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # an api key over http, on loopback
        return QdrantClient(**server)


def qdrant_connection(server: QdrantServer, *, grpc: bool) -> dict[str, Any]:
    """A store's connection to the test Qdrant server, its API key read from the
    environment as an operator's config would; over gRPC with `grpc`."""
    connection: dict[str, Any] = {"url": server.url, "api_key": "${A2M_TEST_QDRANT_API_KEY}"}
    if grpc:
        connection.update(prefer_grpc=True, grpc_port=server.grpc_port)
    return connection


def qdrant_store(
    path: Path,
    server: QdrantServer | None = None,
    *,
    grpc: bool = False,
    collection: str = QDRANT_SERVER_ACL,
) -> dict[str, Any]:
    """The ACL store: qdrant-edge at `path`, or `collection` on `server`."""
    return {
        "backend": "qdrant",
        "index": "scifact" if server is None else collection,
        "connection": (
            {"path": str(path)} if server is None else qdrant_connection(server, grpc=grpc)
        ),
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


# -- colliding ids -----------------------------------------------------------------------

SECRET = "secret-bravo-payload-9k"
"""In every document of tenant B: it must never appear in an answer to tenant A."""
TENANT_SCOPE = {"filters": [{"field": "tenant", "claims": ["tenant"]}]}
ROUTING_INDEX = "a2m-test-sec-routing"
"""Four shards; ``r1`` and ``r2`` are each held twice, with routing A and B."""
ALIAS = "a2m-test-sec-alias"
ALIAS_INDEXES = ("a2m-test-sec-alias-1", "a2m-test-sec-alias-2")
"""The alias spans both; each holds an ``r1`` (tenant A in the first, B in the second)."""
QUERY_VECTOR = [1.0, 0.0, 0.0, 0.1]


def collision_doc(doc_id: str, tenant: str, vector: list[float], when: str) -> dict[str, Any]:
    text = f"alpha quarterly figures {doc_id} of tenant {tenant}"
    if tenant == "B":
        text += f" {SECRET}"
    return {
        "tenant": tenant,
        "key": f"k/{doc_id}",
        "text": text,
        "created_at": when,
        "embedding": vector,
    }


def _collision_body(engine: Engine, shards: int) -> dict[str, Any]:
    settings: dict[str, Any] = {"number_of_shards": shards, "number_of_replicas": 0}
    vector: dict[str, Any]
    if engine == "elasticsearch":
        vector = {"type": "dense_vector", "dims": 4, "index": True, "similarity": "cosine"}
    else:
        settings["knn"] = True
        vector = {
            "type": "knn_vector",
            "dimension": 4,
            "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"},
        }
    return {
        "settings": {"index": settings},
        "mappings": {
            "dynamic": "strict",
            "properties": {
                "tenant": {"type": "keyword"},
                "key": {"type": "keyword"},
                "text": {"type": "text", "analyzer": "standard"},
                "created_at": {"type": "date"},
                "embedding": vector,
            },
        },
    }


# B's copies are nearer the query vector and newer: without the scope on every request
# they are what an engine would hand back first.
_ROUTED = [
    ("r1", "A", [1.0, 0.0, 0.0, 0.0], "2026-01-01T00:00:00Z"),
    ("r1", "B", QUERY_VECTOR, "2026-01-02T00:00:00Z"),
    ("r2", "A", [0.9, 0.1, 0.0, 0.0], "2026-01-01T00:01:00Z"),
    ("r2", "B", QUERY_VECTOR, "2026-01-02T00:01:00Z"),
]


def load_collisions(engine: Engine, url: str) -> None:
    """(Re)create the routing-collision index and the alias over two colliding indexes."""
    client = lucene_client(engine, url)
    try:
        for index in (ROUTING_INDEX, *ALIAS_INDEXES):
            if client.indices.exists(index=index):
                client.indices.delete(index=index)
        client.indices.create(index=ROUTING_INDEX, body=_collision_body(engine, 4))
        for doc_id, tenant, vector, when in _ROUTED:
            client.index(
                index=ROUTING_INDEX,
                id=doc_id,
                routing=tenant,
                body=collision_doc(doc_id, tenant, vector, when),
            )
        for index, (tenant, vector, when) in zip(
            ALIAS_INDEXES,
            [
                ("A", [1.0, 0.0, 0.0, 0.0], "2026-01-01T00:00:00Z"),
                ("B", QUERY_VECTOR, "2026-01-02T00:00:00Z"),
            ],
            strict=True,
        ):
            client.indices.create(index=index, body=_collision_body(engine, 1))
            client.index(index=index, id="r1", body=collision_doc("r1", tenant, vector, when))
        client.indices.put_alias(index=list(ALIAS_INDEXES), name=ALIAS)
        client.indices.refresh(index=[ROUTING_INDEX, *ALIAS_INDEXES])
    finally:
        client.close()


def collision_store(engine: str, url: str, index: str) -> dict[str, Any]:
    return {
        "backend": engine,
        "index": index,
        "connection": {"hosts": [url], "timeout_ms": 30_000},
        "mapping": {"content": "text", "key": "key", "created_at": "created_at"},
        "search": {"mode": "lexical", "text_fields": ["text"], "vector_field": "embedding"},
        "scope": TENANT_SCOPE,
    }


QDRANT_COLLISIONS = "collide"
QDRANT_NEIGHBOUR = "collide-neighbour"
COLLISION_SERVER_INDEXES = {"tenant": "keyword", "key": "keyword", "created_at": "datetime"}
"""What the colliding collections filter and order by, indexed on the server."""
QDRANT_COLLISIONS_ALIAS = "collide-alias"
"""On the server: an alias of :data:`QDRANT_COLLISIONS`, read as a store's index."""
"""Another collection in the same Qdrant holding point 1 with tenant B's content."""


def load_qdrant_collisions(path: Path, server: dict[str, Any] | None = None) -> None:
    """Point 1 in two collections (A's in the store's, B's in its neighbour), and points 1
    (A) and 2 (B) sharing the key ``k/r1`` inside the store's collection. With `server`
    (qdrant-client keyword arguments) on that server instead, where the alias
    :data:`QDRANT_COLLISIONS_ALIAS` names the store's collection, and the tenant field
    and the fields filtered and ordered by are indexed."""
    from qdrant_client import models

    from connectors.qdrant.sparse import LexicalSparseEncoder

    rows = {
        QDRANT_COLLISIONS: [
            (1, collision_doc("r1", "A", [1.0, 0.0, 0.0, 0.0], "2026-01-01T00:00:00Z")),
            (2, collision_doc("r1", "B", QUERY_VECTOR, "2026-01-02T00:00:00Z")),
        ],
        QDRANT_NEIGHBOUR: [(1, collision_doc("r1", "B", QUERY_VECTOR, "2026-01-02T00:00:00Z"))],
    }
    encoder = LexicalSparseEncoder(avgdl=8.0)
    client = qdrant_client_for(path, server)
    try:
        for collection, docs in rows.items():
            if server is not None and client.collection_exists(collection):
                client.delete_collection(collection)
            client.create_collection(
                collection,
                vectors_config={
                    "dense": models.VectorParams(size=4, distance=models.Distance.COSINE)
                },
                sparse_vectors_config={
                    SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)
                },
            )
            points = []
            for point_id, doc in docs:
                sv = encoder.encode_document(doc["text"])
                sparse = models.SparseVector(indices=list(sv.indices), values=list(sv.values))
                payload = {k: v for k, v in doc.items() if k != "embedding"}
                vector = {"dense": doc["embedding"], SPARSE: sparse}
                points.append(models.PointStruct(id=point_id, vector=vector, payload=payload))
            client.upsert(collection, points=points)
            if server is not None:
                for field, schema in COLLISION_SERVER_INDEXES.items():
                    client.create_payload_index(collection, field, schema, wait=True)
        if server is not None:
            client.update_collection_aliases(
                change_aliases_operations=[
                    models.CreateAliasOperation(
                        create_alias=models.CreateAlias(
                            collection_name=QDRANT_COLLISIONS, alias_name=QDRANT_COLLISIONS_ALIAS
                        )
                    )
                ]
            )
    finally:
        client.close()


def qdrant_collision_store(
    path: Path, server: QdrantServer | None = None, *, grpc: bool = False, index: str = ""
) -> dict[str, Any]:
    """The colliding-ids store: qdrant-edge at `path`, or on `server` reading `index`
    (the collection or its alias)."""
    return {
        "backend": "qdrant",
        "index": index or QDRANT_COLLISIONS,
        "connection": (
            {"path": str(path)} if server is None else qdrant_connection(server, grpc=grpc)
        ),
        "mapping": {"content": "text", "key": "key", "created_at": "created_at"},
        "search": {"mode": "lexical", "sparse_vector": SPARSE, "vector_field": "dense"},
        "scope": TENANT_SCOPE,
    }
