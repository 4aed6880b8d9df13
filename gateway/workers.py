"""``serve --workers N``: N gateway processes answering on one listening socket.

For bare metal or a VM with several cores: one Python process uses about one
core, so N processes serve about N times the calls. The parent binds the port
once and starts N workers (multiprocessing's spawn, as uvicorn's own
supervisor does: a fresh interpreter, no inherited event loop or engine
connection); the kernel hands each new connection to one of them. Every worker
loads the config itself and has its own connectors, rate-limit buckets and
metrics, so ``/metrics`` and ``/readyz`` describe the worker that answered.

The parent only supervises: SIGTERM or SIGINT stops every worker gracefully
(each drains as a single ``serve`` would), then the parent exits the way a
single ``serve`` does. A worker that exits on its own stops the others and the
parent exits 1: the service manager restarts the whole, rather than this
process hiding a crash loop.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
from multiprocessing.process import BaseProcess

log = logging.getLogger("a2m.workers")

STOP_TIMEOUT_S = 60.0
"""How long a stopping worker may drain past the configured shutdown grace."""


def run_worker(config_path: str | None, host: str, sock: socket.socket) -> None:
    """One worker process: the same start-up as a single ``serve``, on the shared socket."""
    from gateway.observability.logs import configure
    from gateway.serve import load, serve_http

    cfg = load(config_path)
    configure(cfg.server.log_format, cfg.server.log_level)
    sys.exit(serve_http(cfg, host, sock.getsockname()[1], sockets=[sock]))


def serve_workers(
    config_path: str | None, host: str, port: int, workers: int, grace_s: float
) -> int:
    """Run ``workers`` gateway processes on ``host:port`` until SIGTERM or SIGINT.

    Returns the exit status (or re-raises the stopping signal, as uvicorn does).

    Raises:
        OSError: the address cannot be bound.
    """
    from gateway.serve import listen, url_of

    sock = listen(host, port)
    log.info("listening on %s with %d workers (Ctrl-C stops them)", url_of(sock), workers)
    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signum)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    spawn = multiprocessing.get_context("spawn")
    procs: list[BaseProcess] = []
    for i in range(workers):
        worker = spawn.Process(
            target=run_worker, args=(config_path, host, sock), name=f"a2m-worker-{i + 1}"
        )
        worker.start()
        procs.append(worker)
    log.info("serving with %d workers", workers, extra={"pids": [p.pid for p in procs]})
    failed: BaseProcess | None = None
    while not stop.wait(0.5):
        failed = next((p for p in procs if p.exitcode is not None), None)
        if failed is not None:
            log.error("worker %s exited with %s; stopping the others", failed.pid, failed.exitcode)
            break
    for proc in procs:
        if proc.exitcode is None and proc.pid is not None:
            os.kill(proc.pid, signal.SIGTERM)
    for proc in procs:
        proc.join(grace_s + STOP_TIMEOUT_S)
        if proc.exitcode is None:
            proc.kill()
            proc.join()
    sock.close()
    for signum, handler in previous.items():
        signal.signal(signum, handler)
    if failed is not None:
        return 1
    if received and received[-1] == signal.SIGINT:
        raise KeyboardInterrupt
    signal.raise_signal(signal.SIGTERM)  # previous handler restored: exits as `serve` does
    return 0
