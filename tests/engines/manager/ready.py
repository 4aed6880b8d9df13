"""Waiting for launched nodes: one readiness check per kind, and recording the ready ones."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import Any

from tests.engines.manager.keycloak import KEYCLOAK_READY_TIMEOUT, keycloak_poll
from tests.engines.manager.kinds import kind_of, version_of
from tests.engines.manager.launching import Launch, failure
from tests.engines.manager.nodes import HOST, KEYCLOAK, QDRANT, READY_TIMEOUT, EngineError, log
from tests.engines.manager.procs import pid_alive, terminate
from tests.engines.manager.qdrant import qdrant_ready
from tests.engines.manager.rest import healthy, node_pid
from tests.engines.manager.state import run_dir, save_state


def opensearch_port_from_log(launch: Launch) -> int | None:
    """The runner prints `HTTP Port: N`; trust it over what we asked for."""
    text = launch.out.read_text(errors="replace").rsplit("===== engines.py launch", 1)[-1]
    for line in text.splitlines():
        if line.startswith("HTTP Port:"):
            return int(line.split(":", 1)[1])
    return None


def poll(launch: Launch) -> bool:
    """One readiness check; True once yellow, EngineError if the node died."""
    if kind_of(launch.name) == QDRANT:
        if launch.proc.poll() is not None:
            raise failure(launch, f"exited with {launch.proc.returncode} while starting")
        return qdrant_ready(launch.port)
    if kind_of(launch.name) == KEYCLOAK:
        return keycloak_poll(launch)
    if launch.pidfile is None:  # OpenSearch: our child is the node
        if launch.proc.poll() is not None:
            raise failure(launch, f"exited with {launch.proc.returncode} while starting")
        printed = opensearch_port_from_log(launch)
        if printed is None:
            return False
        launch.port = printed
    else:  # Elasticsearch: the CLI daemonises the server and exits 0 once it has started
        rc = launch.proc.poll()
        if rc not in (None, 0):
            raise failure(launch, f"launcher exited with {rc}")
        if launch.pid is None and launch.pidfile.exists():
            with contextlib.suppress(ValueError):
                launch.pid = int(launch.pidfile.read_text().strip())
        if launch.pid is None:
            return False
        if rc == 0 and not pid_alive(launch.pid):
            raise failure(launch, f"server pid {launch.pid} died while starting")
        # The port was chosen free, but another engine home starting at the same moment may
        # have taken it: then this node fails to bind while that one answers. Ready only
        # when the node answering is ours.
        if not healthy(launch.port):
            return False
        if node_pid(launch.port) not in (None, launch.pid):
            raise failure(launch, f"port {launch.port} is served by another node")
        return True
    return healthy(launch.port)


def wait_ready(
    launches: list[Launch], state: dict[str, dict[str, Any]], timeout: float = READY_TIMEOUT
) -> list[str]:
    """Poll all launches together; record each ready node in `state`. Returns failures."""
    errors: list[str] = []
    pending = list(launches)
    while pending:
        for launch in list(pending):
            try:
                ready = poll(launch)
                limit = KEYCLOAK_READY_TIMEOUT if kind_of(launch.name) == KEYCLOAK else timeout
                if not ready and time.monotonic() - launch.t0 > limit:
                    raise failure(launch, f"not ready after {limit:.0f} s")
            except EngineError as exc:
                errors.append(str(exc))
                pending.remove(launch)
                # Do not leave a half-started node behind: the node, then its whole process
                # group (the ES CLI may have spawned the server before writing the pidfile).
                if launch.pid is not None:
                    terminate(launch.pid, grace=10)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(launch.proc.pid, signal.SIGKILL)
                launch.proc.wait(timeout=10)
                continue
            if ready:
                pending.remove(launch)
                if launch.pidfile is not None:
                    launch.proc.wait(timeout=60)  # the ES CLI exits right after "started"
                boot = time.monotonic() - launch.t0
                assert launch.pid is not None
                state[launch.name] = {
                    "pid": launch.pid,
                    "port": launch.port,
                    "url": f"http://{HOST}:{launch.port}",
                    "version": version_of(launch),
                    **launch.extra,
                    "base_dir": str(run_dir(launch.name)),
                    "log": str(launch.out),
                    "boot_seconds": round(boot, 1),
                    "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                }
                save_state(state)
                log(
                    f"{launch.name} {state[launch.name]['version']} yellow at "
                    f"{state[launch.name]['url']} (pid {launch.pid}, {boot:.1f} s)"
                )
        if pending:
            time.sleep(0.5)
    return errors
