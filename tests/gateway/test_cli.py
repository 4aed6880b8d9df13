"""The console script: `check` is the onboarding preview, bad configs fail with the field named,
`recall` answers a person, and `--help` explains each command."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.install import extra_command

DEMO_YAML = Path(__file__).resolve().parents[2] / "config" / "demo.yaml"


def run(args: list[str], tmp_path: Path, **env_vars: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **env_vars}
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        capture_output=True,
        text=True,
        # With the minilm extra the demo's first start embeds its corpus: minutes of wall
        # time when the CI machine is shared, seconds otherwise.
        timeout=600,
        env=env,
        check=False,
    )


@pytest.mark.integration
def test_check_previews_the_demo_store(tmp_path: Path) -> None:
    proc = run(["check"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["ok"] is True
    assert out["describe"]["protocol"] == "a2m/0.1"
    assert len(out["sample"]) == 3
    for record in out["sample"]:
        assert record["content"]
        assert record["uri"]
        assert record["key"].startswith("demo/")


def test_invalid_config_names_the_field(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(
        "stores:\n  docs:\n    backend: elasticsearch\n    index: d\n"
        "    connection: {hosts: ['http://127.0.0.1:9'], api_key: '${NOT_SET_FOR_TEST}'}\n"
        "    mapping: {content: body}\n    search: {text_fields: [body]}\n"
    )
    proc = run(["check", "--config", str(cfg)], tmp_path)
    assert proc.returncode == 2
    assert "stores.docs.connection.api_key" in proc.stderr
    assert "NOT_SET_FOR_TEST" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("backend", ["elasticsearch", "qdrant"])
def test_check_names_the_store_host_and_attempts_of_an_unreachable_engine(
    tmp_path: Path, backend: str
) -> None:
    """The host is the operator's own config value; its userinfo and the api key stay out."""
    cfg = tmp_path / "down.yaml"
    if backend == "qdrant":
        where = "url: 'http://127.0.0.1:9'"  # an api key over http would warn, rightly
        search = "{mode: lexical, sparse_vector: s}"
    else:
        where = "hosts: ['http://elastic:pw-in-url-1234@127.0.0.1:9'], api_key: '${DOWN_KEY}'"
        search = "{text_fields: [body]}"
    cfg.write_text(
        f"stores:\n  docs:\n    backend: {backend}\n    index: c\n"
        f"    connection: {{{where}, timeout_ms: 5000, retries: 2}}\n"
        f"    mapping: {{content: body, created_at: ts}}\n    search: {search}\n"
    )
    proc = run(["check", "--config", str(cfg)], tmp_path, DOWN_KEY="key-value-must-not-show")
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["ok"] is False
    assert out["engine"] == "http://127.0.0.1:9"
    what = "collection" if backend == "qdrant" else "index"
    tried = re.fullmatch(
        f"opening {what} 'c': gave up after (\\d+\\.\\d) s "
        "\\(up to 3 attempts with connection.retries 2, at most 5000 ms each\\)",
        out["tried"],
    )
    assert tried is not None, out["tried"]
    assert 0 < float(tried.group(1)) < 60
    refused = "the connection was refused (nothing listens on that host and port)"
    assert out["why"] == refused
    line = f"a2m-gateway: store docs ({backend}, http://127.0.0.1:9): "
    assert line in proc.stderr
    assert f": {refused} (tried: opening {what}" in proc.stderr
    # One line from check itself, not one WARNING per attempt from the client library.
    assert "WARNING" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    both = proc.stdout + proc.stderr
    for secret in ("pw-in-url-1234", "key-value-must-not-show", "elastic:"):
        assert secret not in both
    assert "Traceback" not in both


def _help(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    from gateway.cli import main

    with pytest.raises(SystemExit) as exit_:
        main([*args, "--help"])
    assert exit_.value.code == 0
    return " ".join(capsys.readouterr().out.split())


def test_top_level_help_explains_the_gateway(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help([], capsys)
    assert "read-only A2M 0.1" in text
    assert "Elasticsearch, OpenSearch, Qdrant" in text
    assert "Without --config every command uses the embedded demo store" in text
    for command in ("serve", "stdio", "check", "recall", "hash-key"):
        assert command in text


def test_bare_command_prints_the_help(tmp_path: Path) -> None:
    proc = run([], tmp_path)
    assert proc.returncode == 2
    assert "Without --config every command uses the embedded demo store" in " ".join(
        proc.stdout.split()
    )
    assert "hash-key" in proc.stdout
    assert "arguments are required" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["serve", "--prot", "9000"], "did you mean --port?"),
        (["recall", "q", "--lmit", "3"], "did you mean --limit?"),
        (["check", "--confg", "x.yaml"], "did you mean --config?"),
    ],
)
def test_a_misspelt_option_gets_the_nearest_one(tmp_path: Path, args: list[str], hint: str) -> None:
    proc = run(args, tmp_path)
    assert proc.returncode == 2
    assert f"unrecognized arguments: {' '.join(args[-2:])} ({hint})" in proc.stderr
    assert f"usage: a2m-gateway {args[0]}" in proc.stderr


def test_an_option_like_nothing_gets_no_guess(tmp_path: Path) -> None:
    proc = run(["serve", "--xyzzy"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.rstrip().endswith("unrecognized arguments: --xyzzy")


def test_the_help_text_wraps_evenly() -> None:
    # The description is printed as written: no line much shorter than its paragraph's others.
    from gateway import cli

    paragraphs = [p.splitlines() for p in (cli.__doc__ or "").split("\n\n")]
    for lines in paragraphs:
        prose = [line for line in lines if not line.startswith("  ")]
        for line in prose[:-1]:  # a paragraph's last line may be short
            assert len(line) >= 70, line


def test_serve_help_gives_host_and_port_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(["serve"], capsys)
    assert "--host HOST address to bind (default: server.host from the config, 127.0.0.1" in text
    assert "--port PORT TCP port, 1-65535, or 0 for any free port" in text
    assert "default: server.port from the config, 8080 when unset" in text
    assert "(default: None)" not in text


@pytest.mark.parametrize("command", ["serve", "stdio", "check", "recall"])
def test_no_config_means_the_demo(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = _help([command, "q"] if command == "recall" else [command], capsys)
    assert "--config CONFIG config YAML (default: the embedded demo store" in text


@pytest.mark.integration
def test_recall_prints_ranked_cited_records(tmp_path: Path) -> None:
    proc = run(["recall", "how are scores normalised?", "--limit", "3"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert re.fullmatch(r"1\. \[(0|1)\.\d\d\] memory/recall: Scores", lines[0]), lines[0]
    assert lines[1] == "   gateway/demo/corpus/recall.md#scores"
    assert lines[2].startswith("   Scores are ranking information")
    ranks = [line.split(".", 1)[0] for line in lines if line[:1].isdigit()]
    assert ranks == ["1", "2", "3"]
    assert proc.stderr == ""  # no INFO lines interleaved with what a person reads


@pytest.mark.integration
def test_recall_json_is_the_a2m_result(tmp_path: Path) -> None:
    proc = run(["recall", "helm chart", "--json", "--limit", "2"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert len(result["records"]) == 2
    assert all(r["uri"].startswith("gateway/demo/corpus/helm.md#") for r in result["records"])


def test_check_says_a_host_name_does_not_resolve(tmp_path: Path) -> None:
    cfg = tmp_path / "dns.yaml"
    cfg.write_text(
        "stores:\n  docs:\n    backend: elasticsearch\n    index: c\n"
        "    connection: {hosts: ['http://no-such-host.invalid:9200'], timeout_ms: 5000, "
        "retries: 0}\n    mapping: {content: body}\n    search: {text_fields: [body]}\n"
    )
    proc = run(["check", "--config", str(cfg)], tmp_path)
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["why"] == "its host name does not resolve (DNS)"
    assert "(DNS) (tried: opening index 'c': gave up after" in proc.stderr


def test_recall_refuses_an_unknown_store(tmp_path: Path) -> None:
    proc = run(["recall", "x", "--store", "nope"], tmp_path)
    assert proc.returncode == 2
    assert "no store named 'nope'" in proc.stderr


@pytest.mark.parametrize("limit", ["-1", "1000"])
def test_recall_refuses_a_limit_in_the_a2m_wording(tmp_path: Path, limit: str) -> None:
    proc = run(["recall", "x", "--config", str(DEMO_YAML), "--limit", limit], tmp_path)
    assert proc.returncode == 2, proc.stderr
    wording = "'limit' must be between 0 and 100 (the store's max_recall_limit; 0: as many"
    assert wording in proc.stderr
    assert "Traceback" not in proc.stderr


def test_recall_on_an_unreachable_engine_is_one_error_line(tmp_path: Path) -> None:
    cfg = tmp_path / "down.yaml"
    cfg.write_text(
        "stores:\n  docs:\n    backend: elasticsearch\n    index: c\n"
        "    connection: {hosts: ['http://127.0.0.1:9'], timeout_ms: 5000, retries: 0}\n"
        "    mapping: {content: body}\n    search: {text_fields: [body]}\n"
    )
    proc = run(["recall", "anything", "--config", str(cfg)], tmp_path)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.startswith("a2m-gateway: recall failed: ")
    assert "(-32" in proc.stderr
    assert proc.stderr.rstrip().endswith(
        ": the connection was refused (nothing listens on that host and port)"
    )
    assert len(proc.stderr.splitlines()) == 1
    assert "Traceback" not in proc.stderr


LOCAL_EMBEDDER_CONFIG = """\
stores:
  s:
    backend: qdrant
    index: x
    connection: {location: ":memory:"}
    mapping: {content: content}
    search:
      mode: dense
      vector_field: dense
      embedder: {kind: local, model: all-MiniLM-L6-v2}
"""


@pytest.mark.parametrize("command", [["check"], ["stdio"], ["recall", "q"], ["serve"]])
def test_a_missing_extra_is_one_line_and_exit_2(
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No traceback when `embedder: local` lacks sentence-transformers."""
    import importlib.util

    from gateway.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "sentence_transformers" else real(name, *a),
    )
    path = tmp_path / "local.yaml"
    path.write_text(LOCAL_EMBEDDER_CONFIG)
    assert main([command[0], "--config", str(path), *command[1:]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "a2m-gateway: embedder.kind 'local' needs the sentence-transformers package: "
        + extra_command("local-embeddings")
    ]


def test_version_names_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    from gateway import __version__
    from gateway.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"a2m-gateway {__version__}"


def test_hash_key_help_describes_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(["hash-key"], capsys)
    assert "Print the hash of an API key" in text
    assert "stdin" in text
    assert "--new" in text


@pytest.mark.parametrize(
    ("port", "problem"),
    [
        ("99999", "99999 is not a TCP port: use 1-65535, or 0 for any free port"),
        ("-1", "-1 is not a TCP port: use 1-65535, or 0 for any free port"),
        ("65536", "65536 is not a TCP port"),
        ("http", "'http' is not a port number"),
    ],
)
def test_serve_refuses_a_port_out_of_range(
    port: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from gateway.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--port", port])
    assert exit_.value.code == 2
    assert problem in capsys.readouterr().err


def test_check_refuses_what_serve_refuses_with_the_same_sentence(tmp_path: Path) -> None:
    """A scoped store without server.auth: serve refuses it, so check does too (exit 2)."""
    cfg = tmp_path / "scoped.yaml"
    cfg.write_text(
        "stores:\n  docs:\n    backend: elasticsearch\n    index: d\n"
        "    connection: {hosts: ['http://127.0.0.1:9'], timeout_ms: 5000, retries: 0}\n"
        "    mapping: {content: body}\n    search: {text_fields: [body]}\n"
        "    scope: {filters: [{field: tenant, claims: [tenant]}]}\n"
    )
    check = run(["check", "--config", str(cfg)], tmp_path)
    serve = run(["serve", "--config", str(cfg), "--port", "0"], tmp_path)
    assert check.returncode == serve.returncode == 2
    sentence = "a2m-gateway: stores docs have scope.filters or scope.forward_credential"
    assert check.stderr.strip().splitlines() == serve.stderr.strip().splitlines()
    assert check.stderr.startswith(sentence)
    assert check.stdout == ""  # refused before any engine was asked


def test_check_counts_no_attempts_for_a_host_it_never_tried(tmp_path: Path) -> None:
    cfg = tmp_path / "bad-host.yaml"
    cfg.write_text(
        "stores:\n  docs:\n    backend: elasticsearch\n    index: d\n"
        "    connection: {hosts: ['not-a-url'], retries: 3}\n"
        "    mapping: {content: body}\n    search: {text_fields: [body]}\n"
    )
    proc = run(["check", "--config", str(cfg)], tmp_path)
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert "attempts" not in out["tried"]
    assert "connection.retries" not in out["tried"]
    assert out["tried"] == "opening index 'd': stopped at the first error (not one that is retried)"
    assert "connection.hosts" in out["error"]


@pytest.fixture
def plain_http_server() -> Iterator[str]:
    """A real HTTP server on loopback that is no search engine: 404 for every path."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class NotFound(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<html><body>Not Found</body></html>"
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_HEAD = do_GET

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("backend", ["elasticsearch", "opensearch"])
def test_check_on_a_server_that_is_no_search_engine_says_so(
    plain_http_server: str, backend: str, tmp_path: Path
) -> None:
    cfg = tmp_path / "web.yaml"
    cfg.write_text(
        f"stores:\n  docs:\n    backend: {backend}\n    index: d\n"
        f"    connection: {{hosts: ['{plain_http_server}'], timeout_ms: 2000, retries: 0}}\n"
        "    mapping: {content: body}\n    search: {text_fields: [body]}\n"
    )
    proc = run(["check", "--config", str(cfg)], tmp_path)
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert "does not exist" not in out["error"]
    assert "not an Elasticsearch or OpenSearch node" in out["error"]


def test_recall_where_a_key_the_store_cannot_test_is_named(tmp_path: Path) -> None:
    proc = run(
        ["recall", "read only", "--config", str(DEMO_YAML), "--where", "grop=recall"], tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "No record answers 'read only'.\n"
    assert proc.stderr == (
        "a2m-gateway: where.grop matched nothing: store demo cannot test it "
        "(keys it can test: id, key, group, uri, media_type, title)\n"
    )


def test_recall_where_filters_on_a_key_the_store_can_test(tmp_path: Path) -> None:
    args = ["recall", "scores", "--config", str(DEMO_YAML), "--json", "--limit", "5"]
    proc = run([*args, "--where", "group=recall", "--where", "group=describe"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    groups = {r["group"] for r in json.loads(proc.stdout)["records"]}
    assert groups
    assert groups <= {"recall", "describe"}
    # Control: without the filter other groups answer too.
    unfiltered = json.loads(run(args, tmp_path).stdout)["records"]
    assert {r["group"] for r in unfiltered} - {"recall", "describe"}


def test_recall_where_needs_key_equals_value(tmp_path: Path) -> None:
    proc = run(["recall", "x", "--config", str(DEMO_YAML), "--where", "group"], tmp_path)
    assert proc.returncode == 2
    assert "--where 'group': expected KEY=VALUE" in proc.stderr
