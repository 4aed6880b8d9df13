"""A Qdrant server that speaks only TLS, on REST and gRPC: the connection's TLS options.

The server is the binary that ``A2M_QDRANT_BIN`` names (as for the engines.py
node), started here with its own certificate (self-signed for 127.0.0.1) and an
API key; where no binary is named these tests skip, and
``tests/connectors/test_qdrant_wire.py`` proves the same over TLS against the
wire doubles. A store trusting that certificate (``ca_certs``) reads over both
protocols; one that does not fails at open with the connector's sentence, never
a traceback or the host.
"""

from __future__ import annotations

import secrets
import ssl
import subprocess
import time
import urllib.request
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from connectors.base import SearchRequest
from connectors.errors import EngineConfigError
from connectors.qdrant.connector import QdrantConnector
from tests.connectors.conftest import free_port
from tests.connectors.specs import spec_of
from tests.connectors.test_qdrant_server import COLLECTION, INDEXES, SPARSE, create
from tests.engines.manager.qdrant import QDRANT_BIN_VAR, qdrant_binary, qdrant_named
from tests.support.certs import write_self_signed

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class TlsQdrant:
    url: str
    grpc_port: int
    api_key: str
    ca: Path


def ready(url: str, ca: Path) -> bool:
    try:
        context = ssl.create_default_context(cafile=str(ca))
        with urllib.request.urlopen(f"{url}/readyz", timeout=2, context=context) as r:
            return bool(r.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="module")
def tls_qdrant(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsQdrant]:
    if not qdrant_named():
        pytest.skip(
            f"no Qdrant server binary named: {QDRANT_BIN_VAR} is unset (no registry ships one; "
            'see docs/engines.md, "A Qdrant server")'
        )
    base = tmp_path_factory.mktemp("qdrant-tls")
    cert, key = write_self_signed(base, "qdrant")
    http_port, grpc_port, api_key = free_port(), free_port(), secrets.token_urlsafe(24)
    config = base / "config.yaml"
    config.write_text(
        "telemetry_disabled: true\n"
        f"storage:\n  storage_path: {base / 'storage'}\n  snapshots_path: {base / 'snap'}\n"
        f"service:\n  host: 127.0.0.1\n  http_port: {http_port}\n  grpc_port: {grpc_port}\n"
        f"  enable_tls: true\n  api_key: {api_key}\n"
        f"tls:\n  cert: {cert}\n  key: {key}\n"
    )
    log = (base / "qdrant.log").open("wb")
    proc = subprocess.Popen(
        [str(qdrant_binary()), "--config-path", str(config), "--disable-telemetry"],
        cwd=base,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = TlsQdrant(f"https://127.0.0.1:{http_port}", grpc_port, api_key, cert)
    try:
        deadline = time.monotonic() + 60
        while not ready(server.url, cert):
            assert proc.poll() is None, (base / "qdrant.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the TLS Qdrant server did not become ready"
            time.sleep(0.2)
        from qdrant_client import QdrantClient

        context = ssl.create_default_context(cafile=str(cert))
        admin = QdrantClient(
            url=server.url, api_key=api_key, verify=context, timeout=30, check_compatibility=False
        )
        try:
            create(admin, COLLECTION, indexes=INDEXES)
        finally:
            admin.close()
        yield server
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def store(server: TlsQdrant, grpc: bool, **connection: Any) -> dict[str, Any]:
    conn: dict[str, Any] = {"url": server.url, "api_key": server.api_key, "retries": 0}
    if grpc:
        conn.update(prefer_grpc=True, grpc_port=server.grpc_port)
    conn.update(connection)
    return {
        "backend": "qdrant",
        "index": COLLECTION,
        "connection": conn,
        "mapping": {"content": "text", "key": "key", "created_at": "created_at"},
        "search": {"mode": "lexical", "sparse_vector": SPARSE},
        "request_timeout_ms": 10_000,
    }


async def read(data: dict[str, Any]) -> list[str]:
    c = QdrantConnector(spec_of(data))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            await c.open()
            return [h.id for h in await c.search(SearchRequest(limit=3, text="harbour tides"))]
    finally:
        await c.close()


@pytest.mark.parametrize("grpc", [False, True], ids=["rest", "grpc"])
async def test_a_store_trusting_the_servers_certificate_reads(
    tls_qdrant: TlsQdrant, grpc: bool
) -> None:
    assert len(await read(store(tls_qdrant, grpc, ca_certs=str(tls_qdrant.ca)))) == 3


@pytest.mark.parametrize("grpc", [False, True], ids=["rest", "grpc"])
async def test_an_untrusted_certificate_fails_open_with_a_sentence_not_the_host(
    tls_qdrant: TlsQdrant, grpc: bool
) -> None:
    with pytest.raises(EngineConfigError) as info:
        await read(store(tls_qdrant, grpc))
    assert str(info.value) == (
        "the qdrant server's TLS certificate is not trusted "
        "(connection.ca_certs names the CA that signed it)"
    )
    assert "127.0.0.1" not in str(info.value)
    assert str(tls_qdrant.grpc_port) not in str(info.value)


async def test_verify_certs_false_reads_over_rest(tls_qdrant: TlsQdrant) -> None:
    assert len(await read(store(tls_qdrant, False, verify_certs=False))) == 3
