"""The `cluster` command: start, stop, env, state, and kill|pause|resume|restart of one
member."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import time
from typing import Any

from tests.engines.manager.cluster import (
    CLUSTER_ENGINES,
    Member,
    cluster_members,
    launch_member,
    member_of,
    plan_cluster,
    record_member,
    wait_joined,
)
from tests.engines.manager.commands import running
from tests.engines.manager.kinds import FETCHERS
from tests.engines.manager.nodes import NODES, OPENSEARCH3, EngineError, log
from tests.engines.manager.procs import pid_alive, port_free, terminate, wait_gone
from tests.engines.manager.ready import wait_ready
from tests.engines.manager.state import load_state, locked, run_dir, save_state


def cmd_cluster_start(engine: str) -> int:
    with locked():
        state = load_state()
        names = cluster_members(state, engine)
        if names and all(running(state, n) for n in names):
            log(f"{engine} cluster already running: {', '.join(names)}")
            print_cluster_env(state)
            return 0
        for name in names:  # a partly dead cluster starts again from scratch
            terminate(int(state.pop(name)["pid"]))
        FETCHERS[NODES[engine].kind](NODES[engine].version)
        members = plan_cluster(engine)
        log(
            f"starting a {len(members)}-node {engine} cluster on ports "
            f"{', '.join(str(m.http_port) for m in members)}"
        )
        launches = [launch_member(m, True) for m in members]
        errors = wait_ready(launches, state)
        for member in members:
            record_member(state, member)
        save_state(state)
        if not errors and not wait_joined(members[0].http_port, len(members)):
            errors.append(f"{engine} cluster: fewer than {len(members)} nodes joined in 120 s")
        print_cluster_env(state)
    for err in errors:
        print(err, file=sys.stderr)
    return 1 if errors else 0


def cmd_cluster_stop(engine: str) -> int:
    with locked():
        state = load_state()
        for name in cluster_members(state, engine):
            entry = state.pop(name)
            log(f"stopping {name} (pid {entry['pid']})")
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry["pid"]), signal.SIGCONT)  # a paused JVM cannot run its hook
            terminate(int(entry["pid"]))
            shutil.rmtree(run_dir(name), ignore_errors=True)
            save_state(state)
    return 0


def cmd_cluster_fault(action: str, name: str) -> int:
    """kill (SIGKILL), pause (SIGSTOP: it hangs), resume (SIGCONT), restart (same data, port)."""
    with locked():
        state = load_state()
        entry = state.get(name)
        if not entry or "cluster_engine" not in entry:
            raise EngineError(f"{name} is not a member of a running cluster")
        pid = int(entry["pid"])
        if action == "pause":
            os.kill(pid, signal.SIGSTOP)
        elif action == "resume":
            os.kill(pid, signal.SIGCONT)
        elif action == "kill":
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
                if not wait_gone(pid, 10):
                    raise EngineError(f"{name} pid {pid} survived SIGKILL")
        else:
            return restart_member(state, member_of(entry))
        log(f"{name} (pid {pid}): {action}")
    return 0


def restart_member(state: dict[str, dict[str, Any]], member: Member) -> int:
    """Start a killed member again on its ports with its data; wait until it has rejoined."""
    pid = int(state[member.name]["pid"])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)
    terminate(pid)
    deadline = time.monotonic() + 30
    while not (port_free(member.http_port) and port_free(member.transport_port)):
        if time.monotonic() > deadline:
            raise EngineError(f"the ports of {member.name} are still taken")
        time.sleep(0.5)
    log(f"restarting {member.name} on port {member.http_port} (data kept)")
    errors = wait_ready([launch_member(member, False)], state)
    record_member(state, member)
    save_state(state)
    if not errors and not wait_joined(member.http_port, len(member.peers)):
        errors.append(f"{member.name} did not rejoin its cluster in 120 s")
    for err in errors:
        print(err, file=sys.stderr)
    return 1 if errors else 0


def print_cluster_env(state: dict[str, dict[str, Any]]) -> None:
    for engine in CLUSTER_ENGINES:
        names = cluster_members(state, engine)
        if names:
            urls = ",".join(state[n]["url"] for n in names)
            print(f"export A2M_TEST_{engine.upper()}_CLUSTER_URLS={urls}")


def cmd_cluster(args: argparse.Namespace) -> int:
    if args.action == "start":
        return cmd_cluster_start(args.engine)
    if args.action == "stop":
        return cmd_cluster_stop(args.engine)
    if args.action == "env":
        print_cluster_env(load_state())
        return 0
    if args.action == "state":
        state = load_state()
        members = {n: state[n] for n in cluster_members(state, args.engine)}
        for entry in members.values():
            entry["alive"] = pid_alive(int(entry["pid"]))
        print(json.dumps(members, indent=2, sort_keys=True))
        return 0
    if not args.member:
        raise EngineError(f"cluster {args.action} needs a member name, e.g. {args.engine}-c2")
    return cmd_cluster_fault(args.action, args.member)


def add_cluster_parser(sub: Any) -> None:
    p = sub.add_parser("cluster", help="a 3-node cluster of one line, and faults of one node")
    p.add_argument(
        "action",
        choices=("start", "stop", "env", "state", "kill", "pause", "resume", "restart"),
    )
    p.add_argument("member", nargs="?", help="kill/pause/resume/restart: e.g. opensearch3-c2")
    p.add_argument("--engine", choices=CLUSTER_ENGINES, default=OPENSEARCH3)
