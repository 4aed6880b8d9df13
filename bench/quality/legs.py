"""Each engine's two hybrid legs, as the gateway answers them, saved for offline fusion study.

Fusion is a function of the two legs' ranked lists and scores, so once each judged
query's BM25 (sparse on Qdrant) and dense answers are saved (top 100, through the
gateway, scores as the gateway reports them), fusion methods and their parameters can
be compared in seconds (``python -m bench.quality.fusion_study``) instead of one
engine run per setting:

    python -m bench.quality.legs --engines opensearch qdrant --out legs.json

Takes the harness's flags (``--corpus``, ``--queries``, ``--qrels``, the engines' URLs).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench import machine
from bench.process import start_gateway, stop_server
from bench.quality.collection import Split, load_split
from bench.quality.engines import Tuning, doc_id_of, load_engines
from bench.quality.harness import parse_args
from bench.quality.recall import LIMIT, gateway_config, mode_params

Ranked = list[tuple[str, float]]
"""(document id, score) best first."""


async def _leg(
    base_url: str, store: str, mode: str, split: Split, concurrency: int
) -> dict[str, Ranked]:
    out: dict[str, Ranked] = {}
    queue: asyncio.Queue[str] = asyncio.Queue()
    for qid in split.query_ids:
        queue.put_nowait(qid)
    async with httpx.AsyncClient(base_url=base_url, timeout=60.0) as http:

        async def worker() -> None:
            while not queue.empty():
                qid = queue.get_nowait()
                params = mode_params(mode, split.sf.queries[qid], split.sf.query_vector(qid), LIMIT)
                body = {"jsonrpc": "2.0", "id": qid, "method": "memory/recall", "params": params}
                answer = (await http.post(f"/a2m/{store}", json=body)).json()
                records = answer.get("result", {}).get("records", [])
                out[qid] = [(doc_id_of(r), float(r.get("score") or 0.0)) for r in records]

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


def dump(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """engine -> leg (bm25, dense) -> query id -> ranked (id, score); plus qrels."""
    args = parse_args(argv)
    split = load_split(
        Path(args.corpus), Path(args.queries), Path(args.qrels), limit_queries=args.limit_queries
    )
    tuning = Tuning(text_fields=tuple(args.text_fields.split(",")))
    result: dict[str, Any] = {
        "queries": str(args.queries),
        "qrels": {q: split.qrels[q] for q in split.query_ids},
        "load_before": machine.load_text(),
        "engines": {},
    }
    with tempfile.TemporaryDirectory(prefix="a2m-legs-") as tmp:
        work = Path(tmp)
        loaded = load_engines(split, list(dict.fromkeys(args.engines)), args, work, tuning)
        config = work / "gateway.yaml"
        config.write_text(yaml.safe_dump(gateway_config(loaded), sort_keys=False))
        server = start_gateway(config, work / "data", work / "gateway.log")
        try:
            for item in loaded:
                legs = {}
                for mode in ("bm25", "dense"):
                    started = time.monotonic()
                    legs[mode] = asyncio.run(
                        _leg(server.base_url, item.engine, mode, split, args.concurrency)
                    )
                    print(
                        f"{item.engine} {mode}: {time.monotonic() - started:.0f} s",
                        file=sys.stderr,
                    )
                result["engines"][item.engine] = legs
        finally:
            stop_server(server.proc)
    result["load_after"] = machine.load_text()
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.out:
        print("--out FILE is required", file=sys.stderr)
        return 2
    Path(args.out).write_text(json.dumps(dump(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
