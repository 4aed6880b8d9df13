"""A Qdrant server's wire, scripted: the REST and gRPC answers a real server gives, on real sockets.

No registry ships a Qdrant server, so CI cannot run one. These doubles stand
where the server would, speak its two protocols through qdrant-client's own
message types, and answer what a server answers in each case the connector
must handle: its version and a collection at open, query and scroll results,
and its refusals (HTTP status with Qdrant's JSON error body and ``Retry-After``;
gRPC status, details and ``retry-after`` trailing metadata). What only a real
server decides (ranking, strict mode's checks, RBAC) stays with the real-server
suite; here a test scripts the answer and checks what the connector made of it.

Every request's credential is recorded (``api-key`` header or metadata).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
from qdrant_client import grpc as q
from qdrant_client.conversions.conversion import RestToGrpc
from qdrant_client.http import models

from tests.support.http_peer import HttpPeer, PeerReply, PeerRequest

VERSION = "1.18.3"
COLLECTION = "a2m-wire"
SPARSE = "text-sparse"
INDEXES = {"created_at": "datetime", "key": "keyword", "group": "keyword"}
DOCS = [
    {
        "text": f"note {i} about harbour tides",
        "key": f"notes/{i}",
        "group": "g",
        "created_at": f"2026-01-01T00:0{i}:00Z",
    }
    for i in range(3)
]
"""The points every query and scroll answers with, ids 1..3 in this order."""

GRPC_AS_HTTP = {
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "DEADLINE_EXCEEDED": 408,
    "RESOURCE_EXHAUSTED": 429,
    "INTERNAL": 500,
    "UNAVAILABLE": 503,
    "INVALID_ARGUMENT": 400,
}
"""The gRPC status a Qdrant server sends where its REST API answers the HTTP status."""


@dataclass(frozen=True)
class Refusal:
    """One scripted failure: the HTTP status (and its gRPC twin), the server's error text,
    and a Retry-After in seconds."""

    status: int
    error: str = "scripted refusal"
    retry_after: str | None = None

    @property
    def grpc_code(self) -> str:
        return next(code for code, status in GRPC_AS_HTTP.items() if status == self.status)


HANG = Refusal(0)
"""Script value: take the call and never answer it."""


@dataclass
class Script:
    """What the double answers per operation (``info``, ``collection``, ``query``,
    ``scroll``, ``exists``): absent means the normal answer, a :class:`Refusal` refuses,
    :data:`HANG` never answers; over REST, a reply in ``replies`` is sent as it is (what a
    proxy in front of the server answers instead). ``credentials`` records each call's
    ``api-key``."""

    refusals: dict[str, Refusal] = field(default_factory=dict)
    replies: dict[str, PeerReply] = field(default_factory=dict)
    credentials: list[str | None] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    def decide(self, operation: str, credential: str | None) -> Refusal | None:
        self.calls.append(operation)
        self.credentials.append(credential)
        return self.refusals.get(operation)


# -- the answers, as qdrant-client's REST models (the gRPC ones are converted from them) ---------


def collection_info(
    points: int = len(DOCS),
    sparse: str = SPARSE,
    vectors: dict[str, Any] | None = None,
) -> Any:
    """A collection of ``points`` points: the IDF sparse vector ``sparse``, the dense
    ``vectors`` (name -> ``models.VectorParams``; none: a lexical collection) and the
    payload indexes of :data:`INDEXES`."""
    return models.CollectionInfo(
        status=models.CollectionStatus.GREEN,
        optimizer_status=models.OptimizersStatusOneOf.OK,
        points_count=points,
        indexed_vectors_count=0,
        segments_count=1,
        config=models.CollectionConfig(
            params=models.CollectionParams(
                vectors=vectors or {},
                sparse_vectors={sparse: models.SparseVectorParams(modifier=models.Modifier.IDF)},
            ),
            hnsw_config=models.HnswConfig(m=16, ef_construct=100, full_scan_threshold=10000),
            optimizer_config=models.OptimizersConfig(
                deleted_threshold=0.2,
                vacuum_min_vector_number=1000,
                default_segment_number=0,
                flush_interval_sec=5,
            ),
            wal_config=models.WalConfig(wal_capacity_mb=32, wal_segments_ahead=0),
        ),
        payload_schema={
            name: models.PayloadIndexInfo(data_type=kind, points=points)
            for name, kind in INDEXES.items()
        },
    )


def scored_points() -> list[Any]:
    return [
        models.ScoredPoint(id=i + 1, version=1, score=3.0 - i, payload=doc)
        for i, doc in enumerate(DOCS)
    ]


def records() -> list[Any]:
    return [models.Record(id=i + 1, payload=doc) for i, doc in enumerate(DOCS)]


# -- REST -----------------------------------------------------------------------------------------


def _operation(request: PeerRequest) -> str:
    path = request.path.split("?", 1)[0]
    if path == "/":
        return "info"
    if path.endswith("/exists"):
        return "exists"
    if path.endswith("/points/scroll"):
        return "scroll"
    if "/points/query" in path:
        return "query"
    return "collection"


def _rest_ok(operation: str, request: PeerRequest) -> Any:
    if operation == "info":
        return {"title": "qdrant - vector search engine", "version": VERSION, "commit": "0" * 40}
    if operation == "exists":
        return {"result": {"exists": True}, "status": "ok", "time": 0.0001}
    if operation == "collection":
        return {"result": collection_info().model_dump(mode="json"), "status": "ok"}
    points = [p.model_dump(mode="json") for p in scored_points()]
    if operation == "scroll":
        found = [r.model_dump(mode="json") for r in records()]
        return {"result": {"points": found, "next_page_offset": None}, "status": "ok"}
    if request.path.split("?", 1)[0].endswith("/batch"):
        searches = request.json().get("searches", [])
        return {"result": [{"points": points} for _ in searches], "status": "ok"}
    return {"result": {"points": points}, "status": "ok", "time": 0.0001}


class RestQdrant:
    """Qdrant's REST API on a loopback :class:`HttpPeer` (TLS where ``tls`` gives a cert and
    key), answering as :class:`Script` says."""

    def __init__(self, script: Script, tls: tuple[Path, Path] | None = None) -> None:
        self.script = script
        self.peer = HttpPeer(self._answer, tls=tls)
        self.url = self.peer.url

    def _answer(self, request: PeerRequest) -> PeerReply:
        operation = _operation(request)
        refusal = self.script.decide(operation, request.headers.get("api-key"))
        if operation in self.script.replies:
            return self.script.replies[operation]
        if refusal is HANG:
            return PeerReply(hang=True)
        if refusal is not None:
            body = {"status": {"error": refusal.error}, "time": 0.0}
            headers = {} if refusal.retry_after is None else {"Retry-After": refusal.retry_after}
            return PeerReply.json(body, refusal.status, headers)
        return PeerReply.json(_rest_ok(operation, request))

    def close(self) -> None:
        self.peer.close()


# -- gRPC -----------------------------------------------------------------------------------------


class GrpcQdrant:
    """Qdrant's gRPC services (``Qdrant``, ``Collections``, ``Points``) on a loopback port,
    served by grpcio with qdrant-client's generated servicers and messages."""

    def __init__(self, script: Script, tls: tuple[Path, Path] | None = None) -> None:
        self.script = script
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        q.add_QdrantServicer_to_server(  # type: ignore[no-untyped-call]
            _Root(self), self._server
        )
        q.add_CollectionsServicer_to_server(  # type: ignore[no-untyped-call]
            _Collections(self), self._server
        )
        q.add_PointsServicer_to_server(  # type: ignore[no-untyped-call]
            _Points(self), self._server
        )
        if tls is None:
            self.port = self._server.add_insecure_port("127.0.0.1:0")
        else:
            cert, key = (p.read_bytes() for p in tls)
            creds = grpc.ssl_server_credentials([(key, cert)])
            self.port = self._server.add_secure_port("127.0.0.1:0", creds)
        self._server.start()

    def answer(self, operation: str, context: Any) -> bool:
        """Apply the script to one call: False where it refused (the context is aborted)."""
        metadata = dict(context.invocation_metadata())
        refusal = self.script.decide(operation, metadata.get("api-key"))
        if refusal is HANG:
            self.script.release.wait(30)
            context.abort(grpc.StatusCode.CANCELLED, "the double was released")
        if refusal is None:
            return True
        if refusal.retry_after is not None:
            context.set_trailing_metadata((("retry-after", refusal.retry_after),))
        context.abort(getattr(grpc.StatusCode, refusal.grpc_code), refusal.error)
        return False

    def close(self) -> None:
        self.script.release.set()
        self._server.stop(grace=None).wait(10)


class _Root(q.QdrantServicer):
    def __init__(self, double: GrpcQdrant) -> None:
        self.double = double

    def HealthCheck(self, request: Any, context: Any) -> Any:
        self.double.answer("info", context)
        return q.HealthCheckReply(title="qdrant - vector search engine", version=VERSION)


class _Collections(q.CollectionsServicer):
    def __init__(self, double: GrpcQdrant) -> None:
        self.double = double

    def Get(self, request: Any, context: Any) -> Any:
        self.double.answer("collection", context)
        info = RestToGrpc.convert_collection_info(collection_info())
        return q.GetCollectionInfoResponse(result=info, time=0.0001)

    def CollectionExists(self, request: Any, context: Any) -> Any:
        self.double.answer("exists", context)
        return q.CollectionExistsResponse(result=q.CollectionExists(exists=True), time=0.0001)


class _Points(q.PointsServicer):
    def __init__(self, double: GrpcQdrant) -> None:
        self.double = double

    def _scored(self) -> list[Any]:
        return [RestToGrpc.convert_scored_point(p) for p in scored_points()]

    def Query(self, request: Any, context: Any) -> Any:
        self.double.answer("query", context)
        return q.QueryResponse(result=self._scored(), time=0.0001)

    def QueryBatch(self, request: Any, context: Any) -> Any:
        self.double.answer("query", context)
        batch = [q.BatchResult(result=self._scored()) for _ in request.query_points]
        return q.QueryBatchResponse(result=batch, time=0.0001)

    def Scroll(self, request: Any, context: Any) -> Any:
        self.double.answer("scroll", context)
        found = [RestToGrpc.convert_record(r) for r in records()]
        return q.ScrollResponse(result=found, time=0.0001)


@dataclass
class WireQdrant:
    """Both doubles over one script: REST at ``url``, gRPC at ``grpc_port``."""

    script: Script
    rest: RestQdrant
    grpc: GrpcQdrant

    @property
    def url(self) -> str:
        return self.rest.url

    @property
    def grpc_port(self) -> int:
        return int(self.grpc.port)


def serve_wire(tls: tuple[Path, Path] | None = None) -> Iterator[WireQdrant]:
    """Start both doubles on one fresh :class:`Script`; closed when the generator ends."""
    script = Script()
    rest = RestQdrant(script, tls)
    try:
        double = GrpcQdrant(script, tls)
    except BaseException:
        rest.close()
        raise
    try:
        yield WireQdrant(script, rest, double)
    finally:
        double.close()
        rest.close()
