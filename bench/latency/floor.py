"""The floor: the least any Python gateway on this stack can spend per recall.

A bare ASGI app (no FastAPI, no validation, auth, scope, metrics, logging or
retries) under the gateway's own server settings (uvicorn, uvloop, httptools)
that answers the benchmark's ``memory/recall`` POST by sending the body the
gateway's connector would send to OpenSearch and returning the hits as records.
The engine client:

- ``official``: opensearch-py's ``AsyncOpenSearch`` with the library's own HTTP layer
  (its default aiohttp connection), configured (orjson serializer, pool size) and
  called as the gateway's connector calls it: one transport request per search
  (:class:`connectors.lucene.opensearch.OpenSearchDialect`);
- ``gateway-http``: the same client over the gateway's own HTTP layer beneath it
  (``connectors.lucene.opensearch_http``, :mod:`connectors.http1`), so the engine
  client is exactly the gateway's and the difference is the gateway's logic alone;
- ``raw``: one ``aiohttp`` session posting pre-encoded bytes, no engine client;
- ``none``: no engine call at all, the first engine answer replayed (the server's
  share alone: HTTP in and out, JSON, the records).

``python -m bench.latency --ways direct gateway floor floor-gateway-http floor-raw floor-none``
runs them side by side; each floor's CPU per request is what this stack costs before
any of the gateway's own work.

    python -m bench.latency.floor --port P --opensearch-url URL --index I --client official
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson

from bench.latency.workload import KNN_DEPTH, LIMIT, SOURCE, TEXT_FIELDS

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def engine_body(params: dict[str, Any]) -> dict[str, Any]:
    """The OpenSearch body of the gateway's lexical or kNN recall."""
    body: dict[str, Any] = {
        "size": int(params.get("limit", LIMIT)),
        "_source": {"includes": SOURCE},
        "track_total_hits": False,
    }
    if "query" in params:
        body["query"] = {
            "multi_match": {"query": params["query"], "fields": TEXT_FIELDS, "type": "best_fields"}
        }
    else:
        body["query"] = {"knn": {"embedding": {"vector": params["embedding"], "k": KNN_DEPTH}}}
    return body


def records(answer: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for hit in answer["hits"]["hits"]:
        source = hit.get("_source") or {}
        out.append(
            {
                "id": hit["_id"],
                "content": source.get("text", ""),
                "score": hit.get("_score"),
                "metadata": {"title": source.get("title", "")},
            }
        )
    return out


Search = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def _replay(fetch: Search) -> Search:
    """``fetch`` once, then its first answer again and again."""
    first: dict[str, Any] | None = None

    async def search(body: dict[str, Any]) -> dict[str, Any]:
        nonlocal first
        if first is None:
            first = await fetch(body)
        return first

    return search


def client_search(url: str, index: str, client: str) -> Search:
    """opensearch-py as the gateway's connector calls it, over the library's own aiohttp
    connection (``official``) or over the gateway's HTTP layer (``gateway-http``)."""
    from opensearchpy import AIOHttpConnection

    from connectors.lucene.opensearch import OpenSearchDialect
    from connectors.lucene.spec import LuceneConnectionSpec
    from connectors.spec import ConnectorSpec

    dialect = OpenSearchDialect(AIOHttpConnection if client != "gateway-http" else None)
    spec = ConnectorSpec(
        backend="opensearch",
        index=index,
        connection=LuceneConnectionSpec(hosts=(url,), pool_maxsize=64, timeout_ms=30_000),
    )
    engine: Any = None
    path = f"/{index}/_search"

    async def search(body: dict[str, Any]) -> dict[str, Any]:
        nonlocal engine
        if engine is None:
            engine = await dialect.make_client(spec)
        answer = await dialect.request(engine, "POST", path, seconds=30.0, body=body)
        return answer  # type: ignore[return-value]

    return search


def raw_search(url: str, index: str) -> Search:
    """One aiohttp session posting the encoded body: no engine client."""
    import aiohttp

    session: aiohttp.ClientSession | None = None
    search_url = f"{url}/{index}/_search"
    headers = {"content-type": "application/json"}

    async def search(body: dict[str, Any]) -> dict[str, Any]:
        nonlocal session
        if session is None:
            session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64))
        async with session.post(search_url, data=orjson.dumps(body), headers=headers) as r:
            answer: dict[str, Any] = orjson.loads(await r.read())
        return answer

    return search


def engine_search(url: str, index: str, client: str) -> Search:
    """The search of the floor's ``client`` (see the module's list)."""
    if client in ("official", "gateway-http"):
        return client_search(url, index, client)
    if client == "none":
        return _replay(raw_search(url, index))
    return raw_search(url, index)


def make_app(
    url: str, index: str, client: str
) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    search = engine_search(url, index, client)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                while (await receive())["type"] != "lifespan.shutdown":
                    await send({"type": "lifespan.startup.complete"})
                await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["method"] == "GET":
            payload = b"{}"
        else:
            chunks = []
            more = True
            while more:
                message = await receive()
                chunks.append(message.get("body", b""))
                more = message.get("more_body", False)
            call = orjson.loads(b"".join(chunks))
            answer = await search(engine_body(call["params"]))
            payload = orjson.dumps(
                {"jsonrpc": "2.0", "id": call["id"], "result": {"records": records(answer)}}
            )
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    return app


def main() -> None:
    import uvicorn

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--opensearch-url", required=True)
    p.add_argument("--index", required=True)
    p.add_argument(
        "--client", choices=("official", "gateway-http", "raw", "none"), default="official"
    )
    args = p.parse_args()
    app = make_app(args.opensearch_url, args.index, args.client)
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        loop="uvloop",
        http="httptools",
        log_config=None,
        access_log=False,
        server_header=False,
    )


if __name__ == "__main__":
    main()
