"""The single-node commands: start, stop, kill, restart-one, status and env."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from typing import Any

from tests.engines.manager.keycloak import keycloak_ready
from tests.engines.manager.kinds import FETCHERS, launch
from tests.engines.manager.nodes import KEYCLOAK, NAMES, NODES, QDRANT, EngineError, log
from tests.engines.manager.procs import pick_port, pid_alive, port_free, terminate, wait_gone
from tests.engines.manager.qdrant import (
    QDRANT_BIN_VAR,
    print_qdrant_env,
    qdrant_named,
    qdrant_ready,
)
from tests.engines.manager.ready import wait_ready
from tests.engines.manager.rest import healthy
from tests.engines.manager.state import load_state, locked, run_dir, save_state


def running(state: dict[str, dict[str, Any]], name: str) -> bool:
    entry = state.get(name)
    return bool(entry and pid_alive(int(entry["pid"])))


def print_env(state: dict[str, dict[str, Any]]) -> None:
    for name in NAMES:
        if running(state, name):
            print(f"export {NODES[name].env_var}={state[name]['url']}")
            if name == QDRANT:
                print_qdrant_env(state[name])


def startable_here() -> list[str]:
    """Every node this machine can start: all but a Qdrant server nobody named."""
    if qdrant_named():
        return list(NAMES)
    log(
        f"qdrant: passed over ({QDRANT_BIN_VAR} names no server binary; no registry ships "
        "one): the Qdrant server tests skip unless A2M_TEST_QDRANT_URL names a server"
    )
    return [n for n in NAMES if n != QDRANT]


def cmd_start(names: list[str]) -> int:
    with locked():
        state = load_state()
        todo = [n for n in names if not running(state, n)]
        for name in names:
            if name not in todo:
                log(f"{name} already running at {state[name]['url']} (pid {state[name]['pid']})")
        t0 = time.monotonic()
        for name in todo:  # fetch first (sequential mvn), then boot the nodes in parallel
            FETCHERS[NODES[name].kind](NODES[name].version)
        if todo:
            log(f"artifacts ready in {time.monotonic() - t0:.1f} s")
        launches = []
        for name in todo:
            state.pop(name, None)
            port = pick_port(name)
            log(f"starting {name} on port {port}")
            launches.append(launch(name, port, True))
        errors = wait_ready(launches, state)
        print_env(state)
    for err in errors:
        print(err, file=sys.stderr)
    return 1 if errors else 0


def cmd_stop(names: list[str]) -> int:
    with locked():
        state = load_state()
        for name in names:
            entry = state.pop(name, None)
            if entry:
                log(f"stopping {name} (pid {entry['pid']})")
                terminate(int(entry["pid"]))
            shutil.rmtree(run_dir(name), ignore_errors=True)
            save_state(state)
    return 0


def cmd_kill(name: str) -> int:
    with locked():
        state = load_state()
        entry = state.get(name)
        if not entry:
            raise EngineError(f"{name} was never started")
        pid = int(entry["pid"])
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
            if not wait_gone(pid, 10):
                raise EngineError(f"{name} pid {pid} survived SIGKILL")
        log(
            f"{name} (pid {pid}) killed; `restart-one {name}` brings it back on port "
            f"{entry['port']}"
        )
    return 0


def cmd_restart_one(name: str) -> int:
    with locked():
        state = load_state()
        entry = state.get(name)
        if not entry:
            raise EngineError(f"{name} was never started: use `start --only {name}`")
        port = int(entry["port"])
        terminate(int(entry["pid"]))
        deadline = time.monotonic() + 30
        while not port_free(port):
            if time.monotonic() > deadline:
                raise EngineError(f"port {port} is still taken; cannot restart {name} on it")
            time.sleep(0.5)
        log(f"restarting {name} on port {port} (data kept)")
        errors = wait_ready([launch(name, port, False)], state)
    for err in errors:
        print(err, file=sys.stderr)
    return 1 if errors else 0


def cmd_status() -> int:
    state = load_state()
    ok = True
    for name in NAMES:
        entry = state.get(name)
        if not entry:
            print(f"{name:14} not started")
            continue
        alive = pid_alive(int(entry["pid"]))
        up = {QDRANT: qdrant_ready, KEYCLOAK: keycloak_ready}.get(NODES[name].kind, healthy)
        health = "yellow+" if alive and up(int(entry["port"])) else "down"
        ok = ok and alive and health != "down"
        print(
            f"{name:14} {'running' if alive else 'DEAD':8} {health:8} {entry['url']}  "
            f"pid {entry['pid']}  version {entry['version']}  log {entry['log']}"
        )
    return 0 if ok else 1
