"""Client CPU per engine call, HTTP stacks side by side in one run, against a canned engine.

A child process serves one fixed ``_search`` answer (keep-alive, about 4 KB of JSON,
the headers both clients check), so only the client's side is measured: the CPU
time (``time.process_time``) this process spends per call, at concurrency 1 and 32.

Ways:

- ``opensearch-py``: ``AsyncOpenSearch`` as shipped (``client.search``, stock json).
- ``opensearch-gateway``: the client as the gateway builds it (its connection class over
  the gateway's HTTP client, connectors/http1.py; orjson), called the way the connector
  calls it (``OpenSearchDialect.request``).
- ``elasticsearch-gateway``: the same for ``AsyncElasticsearch`` (``ElasticsearchDialect``).
- ``opensearch-gateway-aiohttp``, ``elasticsearch-gateway-aiohttp``: the same clients
  over the libraries' own aiohttp connection and node: what the gateway's HTTP client
  saves.
- ``aiohttp``: a raw aiohttp session, orjson both ways: no engine client at all.
- ``pyreqwest``: a raw pyreqwest (Rust) client, orjson both ways (needs ``pip install
  pyreqwest``; skipped when it is absent).
- ``opensearch-pyreqwest``: the gateway's ``AsyncOpenSearch`` with a bare pyreqwest
  connection class under its transport (a sketch of the gain: none of the shipped
  classes' Retry-After, resend, TLS or error-mapping work).

    python -m bench.http_clients --calls 3000
    python -m bench.http_clients --engine-url http://127.0.0.1:9200 --index scifact  # a real node
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import orjson

BODY = {"query": {"multi_match": {"query": "vitamin d deficiency", "fields": ["title", "text"]}}}
HITS = [
    {
        "_index": "idx",
        "_id": f"doc-{i}",
        "_score": 10.0 - i,
        "_source": {"title": f"title {i}", "text": "lorem ipsum dolor sit amet " * 12},
    }
    for i in range(10)
]
_INDEX = ["idx"]
"""The index every way searches (``--index`` with ``--engine-url``)."""
ANSWER = orjson.dumps({"took": 1, "timed_out": False, "hits": {"hits": HITS}})
RESPONSE = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-elastic-product: Elasticsearch\r\n"
    b"content-length: " + str(len(ANSWER)).encode() + b"\r\n\r\n" + ANSWER
)

Call = Callable[[], Awaitable[Any]]


class _Canned(asyncio.Protocol):
    """Answers every request on the connection with RESPONSE (requests end at their body)."""

    def connection_made(self, transport: Any) -> None:
        self._t = transport
        self._buf = b""

    def data_received(self, data: bytes) -> None:
        self._buf += data
        while b"\r\n\r\n" in self._buf:
            head, _, rest = self._buf.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(rest) < length:
                return
            self._buf = rest[length:]
            self._t.write(RESPONSE)


def _serve(sock: socket.socket) -> None:
    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(_Canned, sock=sock)
        await server.serve_forever()

    asyncio.run(main())


@contextlib.contextmanager
def canned_engine() -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(256)
    proc = multiprocessing.get_context("fork").Process(target=_serve, args=(sock,), daemon=True)
    proc.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        proc.terminate()
        proc.join(5)
        sock.close()


def _spec(backend: str, url: str) -> Any:
    from connectors.lucene.spec import LuceneConnectionSpec
    from connectors.spec import ConnectorSpec

    connection = LuceneConnectionSpec(hosts=(url,), pool_maxsize=64)
    return ConnectorSpec(backend=backend, index=_INDEX[0], connection=connection)


async def _opensearch_py(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    from opensearchpy import AsyncOpenSearch

    client = AsyncOpenSearch(hosts=[url], maxsize=64)
    return lambda: client.search(index=_INDEX[0], body=BODY), client.close


async def _gateway(
    backend: str, url: str, *, library_http: bool = False
) -> tuple[Call, Callable[[], Awaitable[None]]]:
    """The client as the gateway builds it; `library_http`: over the client library's own
    aiohttp connection or node instead of the gateway's HTTP client (connectors/http1.py)."""
    from connectors.lucene.elasticsearch import ElasticsearchDialect
    from connectors.lucene.opensearch import OpenSearchDialect

    dialect: Any
    if backend == "opensearch":
        from opensearchpy import AIOHttpConnection

        dialect = OpenSearchDialect(AIOHttpConnection if library_http else None)
    else:
        from elastic_transport import AiohttpHttpNode

        dialect = ElasticsearchDialect(AiohttpHttpNode if library_http else None)
    client = await dialect.make_client(_spec(backend, url))

    async def call() -> Any:
        path = f"/{_INDEX[0]}/_search"
        return await dialect.request(client, "POST", path, seconds=5.0, body=BODY)

    return call, lambda: dialect.close_client(client)


async def _aiohttp(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    import aiohttp

    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64))
    headers = {"content-type": "application/json"}

    async def call() -> Any:
        async with session.post(
            f"{url}/{_INDEX[0]}/_search", data=orjson.dumps(BODY), headers=headers
        ) as r:
            return orjson.loads(await r.read())

    return call, session.close


async def _pyreqwest(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    from pyreqwest.client import ClientBuilder

    client = ClientBuilder().max_connections(64).build()
    target = f"{url}/{_INDEX[0]}/_search"

    async def call() -> Any:
        request = client.post(target).header("content-type", "application/json")
        response = await request.body_bytes(orjson.dumps(BODY)).build().send()
        return orjson.loads((await response.bytes()).to_bytes())

    return call, client.close


def _pyreqwest_connection() -> type:
    from urllib.parse import urlencode

    from opensearchpy import AsyncConnection
    from pyreqwest.client import ClientBuilder

    class PyreqwestConnection(AsyncConnection):
        def __init__(self, host: str = "localhost", port: int | None = None, **kwargs: Any):
            super().__init__(host=host, port=port, **kwargs)
            self._client = ClientBuilder().max_connections(64).build()

        async def perform_request(
            self,
            method: str,
            url: str,
            params: Any = None,
            body: bytes | None = None,
            timeout: Any = None,  # noqa: ASYNC109 - the library's signature
            ignore: Any = (),
            headers: Any = None,
        ) -> Any:
            target = f"{self.host}{url}" + (f"?{urlencode(params)}" if params else "")
            builder = self._client.request(method, target).headers(
                {**self.headers, **(headers or {})}
            )
            if body is not None:
                builder = builder.body_bytes(body)
            response = await builder.build().send()
            raw = (await response.bytes()).to_bytes().decode()
            if not 200 <= response.status < 300 and response.status not in ignore:
                self._raise_error(response.status, raw, response.get_header("content-type"))
            return response.status, dict(response.headers.items()), raw

        async def close(self) -> None:
            await self._client.close()

    return PyreqwestConnection


async def _opensearch_pyreqwest(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    from connectors.lucene.opensearch import OpenSearchDialect

    dialect = OpenSearchDialect(connection_class=_pyreqwest_connection())
    client = await dialect.make_client(_spec("opensearch", url))
    return (
        lambda: dialect.request(client, "POST", f"/{_INDEX[0]}/_search", seconds=5.0, body=BODY),
        lambda: dialect.close_client(client),
    )


async def _measure(call: Call, calls: int, concurrency: int) -> float:
    """CPU milliseconds per call, after a warm-up."""
    for _ in range(50):
        await call()
    per_worker = max(1, calls // concurrency)

    async def worker() -> None:
        for _ in range(per_worker):
            await call()

    start = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return (time.process_time() - start) * 1000 / (per_worker * concurrency)


async def run(
    calls: int, rounds: int, engine_url: str | None = None
) -> dict[str, dict[int, float]]:
    ways: dict[str, Callable[[str], Awaitable[tuple[Call, Callable[[], Awaitable[None]]]]]] = {
        "opensearch-py": _opensearch_py,
        "opensearch-gateway": lambda url: _gateway("opensearch", url),
        "opensearch-gateway-aiohttp": lambda url: _gateway("opensearch", url, library_http=True),
        "elasticsearch-gateway": lambda url: _gateway("elasticsearch", url),
        "elasticsearch-gateway-aiohttp": lambda url: _gateway(
            "elasticsearch", url, library_http=True
        ),
        "aiohttp": _aiohttp,
    }
    try:
        import pyreqwest  # noqa: F401

        ways["pyreqwest"] = _pyreqwest
        ways["opensearch-pyreqwest"] = _opensearch_pyreqwest
    except ImportError:
        pass
    if engine_url is not None:  # a real OpenSearch node: the Elasticsearch client would refuse it
        ways.pop("elasticsearch-gateway")
        ways.pop("elasticsearch-gateway-aiohttp")
    results: dict[str, dict[int, float]] = {name: {} for name in ways}
    engine = contextlib.nullcontext(engine_url) if engine_url else canned_engine()
    with engine as url:
        for concurrency in (1, 32):
            for _ in range(rounds):  # interleaved rounds: drift hits every way alike
                for name, make in ways.items():
                    call, close = await make(url)
                    try:
                        ms = await _measure(call, calls, concurrency)
                    finally:
                        await close()
                    best = results[name].get(concurrency)
                    results[name][concurrency] = ms if best is None else min(best, ms)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="calls per way and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the best is kept")
    parser.add_argument(
        "--engine-url",
        help="a real OpenSearch node instead of the canned engine (its answers "
        "arrive as a real node sends them)",
    )
    parser.add_argument("--index", default="idx", help="the index searched, with --engine-url")
    args = parser.parse_args()
    _INDEX[0] = args.index
    results = asyncio.run(run(args.calls, args.rounds, args.engine_url))
    print(f"client CPU per call, ms (best of {args.rounds} rounds of {args.calls} calls)")
    print(f"{'way':<32}{'c=1':>8}{'c=32':>8}")
    for name, by_c in results.items():
        print(f"{name:<32}{by_c[1]:>8.3f}{by_c[32]:>8.3f}")


if __name__ == "__main__":
    main()
