"""``check``: validate a config, reach each store's engine, preview a few mapped records.

One JSON object per store on stdout (its describe, its indexes, three sample
records, whether stored vectors agree with the embedder); a store that cannot
be opened is one line on stderr naming the store, its engine and what was tried.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import TYPE_CHECKING, Any

import orjson

from connectors.errors import ConnectorError, EngineTimeout, EngineUnavailable
from connectors.reach import why_unreachable
from connectors.registry import engine
from gateway.config import ConfigError, GatewayConfig, StoreConfig
from gateway.observability.logs import quiet_engine_clients
from gateway.serve import address, preflight, start_failure

if TYPE_CHECKING:
    from gateway.store.store import Store

log = logging.getLogger("a2m.cli")


def attempts(store: StoreConfig, exc: ConnectorError, waited_s: float) -> str:
    """What `check` did before it failed: only what really was attempted, and for how long."""
    c = store.connection
    what = engine(store.backend).noun
    if c.local:
        return f"opened {what} {store.index!r} in process"
    if not isinstance(exc, EngineUnavailable | EngineTimeout):
        # Refused by the client before a request (a malformed host), or answered by the
        # address: retries are for unreachable and busy engines only.
        return (
            f"opening {what} {store.index!r}: stopped at the first error (not one that is retried)"
        )
    return (
        f"opening {what} {store.index!r}: gave up after {waited_s:.1f} s "
        f"(up to {1 + c.retries} attempts with connection.retries {c.retries}, "
        f"at most {c.timeout_ms} ms each)"
    )


async def check(cfg: GatewayConfig) -> int:
    """Check every store of ``cfg``; 0 when all opened, 1 when one did not, 2 when refused."""
    from gateway.runtime import Gateway

    quiet_engine_clients()
    try:
        preflight(cfg, cfg.server.host)  # what serve would refuse, before any engine is asked
    except ConfigError as exc:
        sys.stderr.write(f"a2m-gateway: {exc}\n")
        return 2
    gateway = Gateway(cfg)
    failed = 0
    try:
        for name, store in gateway.stores.items():
            out: dict[str, Any] = {
                "store": name,
                "backend": store.config.backend,
                "engine": address(store.config),
            }
            created_at = store.config.mapping.created_at_warning()
            if created_at:
                log.warning("store %s: %s", name, created_at)
                out["warnings"] = [created_at]
            began = time.monotonic()
            try:
                await _one(name, store, out)
                out["ok"] = True
            except ConnectorError as exc:
                failed += 1
                out["ok"] = False
                out["error"] = f"{type(exc).__name__}: {exc}"
                why = why_unreachable(exc)
                if why:
                    out["why"] = why
                out["tried"] = attempts(store.config, exc, time.monotonic() - began)
                sys.stderr.write(
                    f"a2m-gateway: {start_failure(name, store.config, exc)} "
                    f"(tried: {out['tried']})\n"
                )
            sys.stdout.write(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode() + "\n")
    finally:
        await gateway.close()
    return 1 if failed else 0


async def _one(name: str, store: Store, out: dict[str, Any]) -> None:
    """Open one store and fill ``out`` with what it shows.

    Raises:
        ConnectorError: the store cannot be opened or read.
    """
    from gateway.store.sampling import sample
    from gateway.store.vectorcheck import compare_stored_vectors

    await store.ensure_started()
    out["describe"] = store.describe()
    if store.info is not None and store.info.indexes:
        out["indexes"] = [
            {
                "field": n.field,
                "kinds": list(n.kinds),
                "present": n.present,
                "purpose": n.purpose,
                **({} if n.present else {"without": n.without}),
            }
            for n in store.info.indexes
        ]
    out["sample"] = await sample(store, 3)
    agreement = await compare_stored_vectors(store)
    if agreement is not None:
        out["vectors"] = agreement.to_dict()
        if not agreement.agrees:
            log.warning(
                "store %s: stored vectors disagree with embedder %s on the records' "
                "own content (min cosine %.3f over %d): dense queries will rank "
                "meaninglessly; configure the model the corpus was embedded with",
                name,
                store.embedder.model_name if store.embedder else None,
                agreement.min_cosine,
                agreement.compared,
            )
