"""Summarise a py-spy profile (``--format raw``: one collapsed stack per line, then a count).

The summary answers "where does the gateway spend its CPU under load": the
share of samples in which each function is on the stack (inclusive) and on
top of it (self), plus a rollup by layer (HTTP server, JSON-RPC, dispatcher,
store, connector, engine client, JSON, logging, metrics, event loop).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>.*?)(?::(?P<line>\d+))?\)$")

# First match wins, checked from the top of the stack down.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("logging", ("logging/", "gateway/observability/logs")),
    ("metrics (prometheus)", ("prometheus_client/", "gateway/observability/metrics")),
    (
        "tracing (OpenTelemetry)",
        ("opentelemetry/", "gateway/observability/tracing", "gateway/observability/telemetry"),
    ),
    ("JSON (orjson/json)", ("orjson", "json/")),
    ("pydantic params", ("pydantic", "gateway/a2m/params")),
    (
        "engine client (opensearch-py/aiohttp)",
        (
            "opensearchpy/",
            "aiohttp/",
            "elasticsearch/",
            "elastic_transport/",
            "yarl/",
            "multidict/",
        ),
    ),
    ("connector + retries", ("connectors/", "tenacity/")),
    ("guard (breaker, shedding)", ("gateway/resilience/",)),
    ("store + mapper", ("gateway/store/", "gateway/config/")),
    ("front + federation", ("gateway/front/", "gateway/federation/")),
    ("security (auth, scopes, rate limit)", ("gateway/security/",)),
    # The MCP SDK's own modules sit at the top of site-packages: "(mcp/..." after _short.
    ("MCP (SDK and tools)", ("(mcp/", "(mcp_types/", "gateway/mcp/", "transports/mcp_door")),
    ("dispatcher + JSON-RPC", ("gateway/a2m/", "gateway/runtime")),
    # Before the app's layer: the gateway's protocol guards and the one write per response.
    (
        "HTTP server (uvicorn/httptools)",
        (
            "uvicorn/",
            "httptools",
            "h11/",
            "transports/coalesce",
            "transports/h11_guard",
            "transports/httptools_guard",
            "transports/head_deadline",
        ),
    ),
    ("HTTP app (Starlette)", ("starlette/", "gateway/transports/")),
    ("event loop (asyncio/anyio)", ("asyncio/", "uvloop", "selectors", "anyio/")),
)
"""Each layer and the path fragments of its frames (project ones as paths under the root)."""


# Top frames where py-spy sees the thread inside a system call that hands the CPU to another
# process (a socket send wakes its reader, epoll waits): on a loaded machine the thread sits
# there runnable, so these samples are mostly time off the CPU (/proc puts the gateway's
# system time at about a tenth of its CPU). "Python work" leaves them out.
WAITING = (
    "_SelectorSocketTransport.write",
    "EpollSelector.select",
    "Runner.run (asyncio/runners.py)",
    "CoalescingTransport._flush",
    "StreamWriter._writelines",
)


@dataclass(frozen=True)
class Summary:
    samples: int
    inclusive: list[tuple[str, float]]
    self_time: list[tuple[str, float]]
    layers: list[tuple[str, float]]
    work_samples: int = 0
    work_layers: tuple[tuple[str, float], ...] = ()

    def text(self, top: int = 20) -> str:
        out = [f"{self.samples} samples"]
        out.append("\nby layer (self time, top frame classified):")
        out += [f"  {share:5.1f}%  {name}" for name, share in self.layers]
        out.append(
            f"\nPython work only ({self.work_samples} samples: socket sends, epoll and the "
            "event loop's run left out):"
        )
        out += [f"  {share:5.1f}%  {name}" for name, share in self.work_layers]
        out.append(f"\ntop {top} self:")
        out += [f"  {share:5.1f}%  {name}" for name, share in self.self_time[:top]]
        out.append(f"\ntop {top} inclusive (gateway and connectors code):")
        ours = [(n, s) for n, s in self.inclusive if "gateway/" in n or "connectors/" in n]
        out += [f"  {share:5.1f}%  {name}" for name, share in ours[:top]]
        return "\n".join(out)


def _short(frame: str) -> str:
    m = _FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    path = m.group("file")
    for marker in ("site-packages/", "lib/python3.11/", "/main/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{m.group('func')} ({path})"


def _layer(stack: list[str]) -> str:
    for frame in reversed(stack):  # from the top of the stack (innermost) down
        for name, markers in LAYERS:
            if any(mk in frame for mk in markers):
                return name
    return "other"


def summarise(lines: Iterable[str]) -> Summary:
    inclusive: Counter[str] = Counter()
    self_time: Counter[str] = Counter()
    layers: Counter[str] = Counter()
    work: Counter[str] = Counter()
    total = 0
    for line in lines:
        line = line.rstrip("\n")
        if not line or " " not in line:
            continue
        stack_text, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_short(f) for f in stack_text.split(";") if f]
        # py-spy puts the thread name first; drop a non-frame prefix.
        frames = [f for f in frames if "(" in f]
        if not frames:
            continue
        total += count
        for name in set(frames):
            inclusive[name] += count
        self_time[frames[-1]] += count
        layer = _layer(frames)
        layers[layer] += count
        if not any(w in frames[-1] for w in WAITING):
            work[layer] += count
    if total == 0:
        return Summary(0, [], [], [])

    def shares(c: Counter[str], of: int = total) -> list[tuple[str, float]]:
        return [(name, 100.0 * n / of) for name, n in c.most_common()]

    worked = sum(work.values())
    return Summary(
        total,
        shares(inclusive),
        shares(self_time),
        shares(layers),
        worked,
        tuple(shares(work, worked)) if worked else (),
    )


def summarise_file(path: Path) -> Summary:
    return summarise(path.read_text(encoding="utf-8", errors="replace").splitlines())
