"""The Helm chart, rendered offline: what a cluster would be given.

Every test renders `helm/a2m-gateway` with `helm template` (no cluster) for the
default values and each example in `helm/a2m-gateway/ci/`, parses the YAML and
checks it: lint, Kubernetes schema validity (kubernetes-validate, offline),
hardening, probes, the config checksum, that no credential reaches a ConfigMap,
that values.schema.json and validateValues refuse bad values, that the command
the chart runs is the image's, and that the `helm test` script makes a real
describe + recall round trip (against a local stand-in server here).

helm comes from the Go module proxy: `scripts/install-helm.sh`. Without helm
these tests skip on a developer's machine and fail when CI is set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from pydantic import BaseModel

from tests.support.http_peer import PeerReply, PeerRequest, StartPeer

pytestmark = pytest.mark.helm

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "a2m-gateway"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
CI_IDS = [p.name.removesuffix("-values.yaml") for p in CI_VALUES]
# Every example plus the chart's defaults (the packaged demo store).
ALL_VALUES: list[Path | None] = [None, *CI_VALUES]
ALL_IDS = ["default", *CI_IDS]

RELEASE = "a2m"
NAMESPACE = "agents"
FULLNAME = "a2m-a2m-gateway"
SECRET_DIR = "/etc/a2m-gateway/secrets"
CONFIG_PATH = "/etc/a2m-gateway/config.yaml"
# The oldest Kubernetes the chart allows (Chart.yaml kubeVersion) and the newest
# schemas kubernetes-validate ships are both checked.
OLDEST_KUBE = "1.25.0"
# Passed to helm explicitly: a helm built without the release -ldflags assumes
# Kubernetes 1.20, below the chart's kubeVersion.
RENDER_KUBE = "1.30.0"
# Custom resources: no Kubernetes schema exists; their shape is asserted below.
CRD_KINDS = {"ServiceMonitor"}
SENTINEL = "SENTINEL-d0-not-leak-7f3a9c"

Manifest = dict[str, Any]


def _on_ci() -> bool:
    return bool(os.environ.get("CI"))


def _find_helm() -> str | None:
    explicit = os.environ.get("HELM_BIN")
    if explicit:
        if not os.access(explicit, os.X_OK):
            pytest.fail(f"HELM_BIN={explicit} is not an executable")
        return explicit
    on_path = shutil.which("helm")
    if on_path:
        return on_path
    # Where scripts/install-helm.sh puts it when GOPATH/bin is not on PATH.
    gopath = os.environ.get("GOPATH") or str(Path.home() / "go")
    candidate = Path(gopath.split(os.pathsep)[0]) / "bin" / "helm"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return None


@pytest.fixture(scope="session")
def helm() -> str:
    found = _find_helm()
    if found is None:
        reason = (
            "helm not found on PATH, in $HELM_BIN or in $GOPATH/bin; "
            "install it with scripts/install-helm.sh"
        )
        if _on_ci():
            pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
        pytest.skip(reason)
    return found


@pytest.fixture(scope="session")
def kubernetes_validate() -> Any:
    try:
        import kubernetes_validate as kv
    except ImportError:
        reason = "kubernetes-validate is not installed (pip install -e '.[dev]')"
        if _on_ci():
            pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
        pytest.skip(reason)
    return kv


@dataclass(frozen=True)
class Render:
    """One `helm template` run."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def manifests(self) -> list[Manifest]:
        assert self.returncode == 0, self.stderr
        docs = [d for d in yaml.safe_load_all(self.stdout) if d]
        for doc in docs:
            assert isinstance(doc, dict), doc
        return cast(list[Manifest], docs)

    def one(self, kind: str, name: str | None = None) -> Manifest:
        found = [
            m
            for m in self.manifests
            if m["kind"] == kind and (name is None or m["metadata"]["name"] == name)
        ]
        assert len(found) == 1, f"expected one {kind}, got {len(found)}"
        return found[0]

    def kinds(self) -> set[str]:
        return {str(m["kind"]) for m in self.manifests}


def _values_args(values: Path | None, sets: Sequence[str], set_strings: Sequence[str]) -> list[str]:
    args: list[str] = []
    if values is not None:
        args += ["--values", str(values)]
    for s in sets:
        args += ["--set", s]
    for s in set_strings:
        args += ["--set-string", s]
    return args


def template(
    helm: str,
    values: Path | None = None,
    *,
    sets: Sequence[str] = (),
    set_strings: Sequence[str] = (),
    chart: Path = CHART,
) -> Render:
    proc = subprocess.run(
        [
            helm,
            "template",
            RELEASE,
            str(chart),
            "--namespace",
            NAMESPACE,
            "--kube-version",
            RENDER_KUBE,
            *_values_args(values, sets, set_strings),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return Render(proc.returncode, proc.stdout, proc.stderr)


_RENDERS: dict[str, Render] = {}


def rendered(helm: str, values: Path | None) -> Render:
    """Renders of unmodified values files, cached for the session."""
    key = str(values)
    if key not in _RENDERS:
        _RENDERS[key] = template(helm, values)
    return _RENDERS[key]


def pod_spec(render: Render) -> dict[str, Any]:
    return cast(dict[str, Any], render.one("Deployment")["spec"]["template"]["spec"])


def gateway_container(render: Render) -> dict[str, Any]:
    containers = pod_spec(render)["containers"]
    assert [c["name"] for c in containers] == ["gateway"]
    return cast(dict[str, Any], containers[0])


def pod_secret_name(render: Render) -> str:
    """The existingSecret the gateway pod mounts."""
    volumes = pod_spec(render).get("volumes", [])
    names = [v["secret"]["secretName"] for v in volumes if "secret" in v]
    assert len(names) == 1, volumes
    return str(names[0])


def hook_pod(render: Render) -> Manifest:
    pods = [
        m
        for m in render.manifests
        if m["kind"] == "Pod" and m["metadata"]["annotations"].get("helm.sh/hook") == "test"
    ]
    assert len(pods) == 1
    return pods[0]


def config_of(render: Render) -> dict[str, Any]:
    text = render.one("ConfigMap", FULLNAME)["data"]["config.yaml"]
    return cast(dict[str, Any], yaml.safe_load(text))


def checksum(render: Render) -> str:
    annotations = render.one("Deployment")["spec"]["template"]["metadata"]["annotations"]
    return str(annotations["checksum/config"])


# --- lint and schema validity ------------------------------------------------


@pytest.mark.parametrize("values", ALL_VALUES, ids=ALL_IDS)
def test_helm_lint_is_clean(helm: str, values: Path | None) -> None:
    proc = subprocess.run(
        [
            helm,
            "lint",
            "--strict",
            "--kube-version",
            RENDER_KUBE,
            str(CHART),
            *_values_args(values, (), ()),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 chart(s) failed" in proc.stdout


@pytest.mark.parametrize("values", ALL_VALUES, ids=ALL_IDS)
def test_every_manifest_passes_kubernetes_validate(
    helm: str, kubernetes_validate: Any, values: Path | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifests = rendered(helm, values).manifests

    def no_network(*args: object, **kwargs: object) -> socket.socket:
        raise AssertionError("kubernetes-validate tried to use the network")

    # The schemas ship inside the package: validation must work offline.
    monkeypatch.setattr(socket, "socket", no_network)
    newest = str(kubernetes_validate.latest_version())
    checked = 0
    for manifest in manifests:
        if manifest["kind"] in CRD_KINDS:
            continue
        for version in (OLDEST_KUBE, newest):
            try:
                kubernetes_validate.validate(manifest, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                where = ".".join(str(p) for p in exc.path)
                pytest.fail(
                    f"{manifest['kind']}/{manifest['metadata']['name']} invalid for "
                    f"Kubernetes {version} at {where}: {exc.message}"
                )
        checked += 1
    assert checked >= 6


def test_examples_render_their_optional_resources(helm: str) -> None:
    base = {
        "ConfigMap",
        "Deployment",
        "NetworkPolicy",
        "Pod",
        "PodDisruptionBudget",
        "Service",
        "ServiceAccount",
    }
    assert rendered(helm, None).kinds() == base
    by_id = dict(zip(CI_IDS, CI_VALUES, strict=True))
    assert rendered(helm, by_id["elasticsearch-apikey"]).kinds() == base | {"ServiceMonitor"}
    assert rendered(helm, by_id["opensearch-sigv4-irsa"]).kinds() == base | {
        "HorizontalPodAutoscaler"
    }
    assert rendered(helm, by_id["qdrant-apikey"]).kinds() == base | {"Ingress"}


def test_chart_never_renders_a_secret(helm: str) -> None:
    for values in ALL_VALUES:
        assert "Secret" not in rendered(helm, values).kinds()


# --- hardening ---------------------------------------------------------------


def _assert_hardened_pod(spec: dict[str, Any], what: str) -> None:
    assert spec["automountServiceAccountToken"] is False, what
    assert not spec.get("hostNetwork"), what
    assert not spec.get("hostPID"), what
    assert not spec.get("hostIPC"), what
    pod_sc = spec["securityContext"]
    assert pod_sc["runAsNonRoot"] is True, what
    assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}, what
    for volume in spec.get("volumes", []):
        assert "hostPath" not in volume, what
    for container in spec["containers"] + spec.get("initContainers", []):
        sc = container["securityContext"]
        name = f"{what} container {container['name']}"
        assert sc["runAsNonRoot"] is True, name
        assert sc["runAsUser"] != 0, name
        assert sc["readOnlyRootFilesystem"] is True, name
        assert sc["allowPrivilegeEscalation"] is False, name
        assert sc["privileged"] is False, name
        assert sc["capabilities"]["drop"] == ["ALL"], name
        assert not sc["capabilities"].get("add"), name
        assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, name


@pytest.mark.parametrize("values", ALL_VALUES, ids=ALL_IDS)
def test_pods_are_hardened(helm: str, values: Path | None) -> None:
    render = rendered(helm, values)
    _assert_hardened_pod(pod_spec(render), "gateway pod")
    _assert_hardened_pod(hook_pod(render)["spec"], "helm test pod")
    assert render.one("ServiceAccount")["automountServiceAccountToken"] is False
    assert (
        pod_spec(render)["serviceAccountName"] == render.one("ServiceAccount")["metadata"]["name"]
    )


@pytest.mark.parametrize("values", ALL_VALUES, ids=ALL_IDS)
def test_only_tmp_and_local_data_are_writable(helm: str, values: Path | None) -> None:
    render = rendered(helm, values)
    container = gateway_container(render)
    volumes = {v["name"]: v for v in pod_spec(render)["volumes"]}
    writable = {m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly", False)}
    local_paths = {
        store["connection"]["path"]
        for store in config_of(render)["stores"].values()
        if store["backend"] == "qdrant" and "path" in store["connection"]
    }
    assert writable == {"/tmp"} | local_paths
    for mount in container["volumeMounts"]:
        if mount["mountPath"] in writable:
            assert "emptyDir" in volumes[mount["name"]], mount


def test_demo_store_gets_an_emptydir_and_remote_stores_do_not(helm: str) -> None:
    default = rendered(helm, None)
    assert list(config_of(default)["stores"]) == ["demo"]
    mounts = {m["mountPath"]: m["name"] for m in gateway_container(default)["volumeMounts"]}
    volume = next(
        v
        for v in pod_spec(default)["volumes"]
        if v["name"] == mounts["/var/lib/a2m-gateway/qdrant"]
    )
    assert volume["emptyDir"]["sizeLimit"] == "1Gi"
    for values in CI_VALUES:
        names = [v["name"] for v in pod_spec(rendered(helm, values))["volumes"]]
        assert not [n for n in names if n.startswith("local-data")], values.name


# --- probes, command, config -------------------------------------------------


@pytest.mark.parametrize("values", ALL_VALUES, ids=ALL_IDS)
def test_probes_hit_health_endpoints(helm: str, values: Path | None) -> None:
    container = gateway_container(rendered(helm, values))
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    expected = {
        "startupProbe": "/healthz",
        "livenessProbe": "/healthz",
        "readinessProbe": "/readyz",
    }
    for probe, path in expected.items():
        assert container[probe]["httpGet"] == {"path": path, "port": "http"}, probe
        assert "enabled" not in container[probe]


def test_probes_can_be_disabled(helm: str) -> None:
    render = template(
        helm,
        sets=[
            "livenessProbe.enabled=false",
            "readinessProbe.enabled=false",
            "startupProbe.enabled=false",
        ],
    )
    container = gateway_container(render)
    assert not {"livenessProbe", "readinessProbe", "startupProbe"} & set(container)


@pytest.mark.parametrize("values", ALL_VALUES, ids=ALL_IDS)
def test_container_runs_serve_on_the_mounted_config(helm: str, values: Path | None) -> None:
    container = gateway_container(rendered(helm, values))
    assert container["command"] == ["a2m-gateway"]
    assert container["args"] == [
        "serve",
        "--config",
        CONFIG_PATH,
        "--host",
        "0.0.0.0",
        "--port",
        "8080",
    ]
    config_mount = next(m for m in container["volumeMounts"] if m["mountPath"] == CONFIG_PATH)
    assert config_mount == {
        "name": "config",
        "mountPath": CONFIG_PATH,
        "subPath": "config.yaml",
        "readOnly": True,
    }


def test_container_port_flows_to_args_service_and_probes(helm: str) -> None:
    render = template(helm, sets=["containerPort=9090", "service.port=80"])
    container = gateway_container(render)
    assert container["args"][-2:] == ["--port", "9090"]
    assert container["ports"][0]["containerPort"] == 9090
    port = render.one("Service")["spec"]["ports"][0]
    assert (port["port"], port["targetPort"]) == (80, "http")
    env = {e["name"]: e["value"] for e in hook_pod(render)["spec"]["containers"][0]["env"]}
    assert env["A2M_BASE_URL"] == f"http://{FULLNAME}:80"


def test_grace_period_covers_prestop_and_shutdown(helm: str) -> None:
    render = rendered(helm, None)
    spec = pod_spec(render)
    grace = config_of(render)["server"]["shutdown_grace_s"]
    sleep = int(gateway_container(render)["lifecycle"]["preStop"]["exec"]["command"][1])
    assert spec["terminationGracePeriodSeconds"] > sleep + grace


@pytest.mark.parametrize("values", CI_VALUES, ids=CI_IDS)
def test_config_is_the_values_config(helm: str, values: Path) -> None:
    """Stores verbatim (no default store merged in); server keys over the chart's defaults."""
    expected = yaml.safe_load(values.read_text())["config"]
    config = config_of(rendered(helm, values))
    assert config["stores"] == expected["stores"]
    assert expected["server"].items() <= config["server"].items()


@pytest.mark.parametrize("values", ALL_VALUES, ids=ALL_IDS)
def test_rendered_config_is_accepted_by_the_gateway(
    helm: str, values: Path | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ConfigMap's config.yaml validates against the gateway's own config model,
    with each secret reference pointed at a stand-in file or variable."""
    from gateway.config import parse_config
    from gateway.security.auth import check_exposure

    render = rendered(helm, values)
    text = render.one("ConfigMap", FULLNAME)["data"]["config.yaml"]
    for ref in set(re.findall(r"\$\{file:([^}]+)\}", text)):
        assert ref.startswith(SECRET_DIR + "/"), ref
        (tmp_path / Path(ref).name).write_text("stand-in\n")
    # Plain paths into the secret mount (api_keys_file, ca_certs) are read as files too.
    for name in set(re.findall(re.escape(SECRET_DIR) + r"/([\w.-]+)", text)):
        if not (tmp_path / name).exists():
            stand_in = "[{subject: t, hash: 'sha256:" + "0" * 64 + "'}]\n"
            (tmp_path / name).write_text(stand_in if name.endswith(".yaml") else "stand-in\n")
    text = text.replace(SECRET_DIR + "/", str(tmp_path) + "/")
    env = gateway_container(render).get("env", [])
    for name in set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", text)):
        assert name in {e["name"] for e in env}, f"${{{name}}} is not set in the pod"
        monkeypatch.setenv(name, "stand-in")
    config = parse_config(yaml.safe_load(text))
    assert set(config.stores) == set(config_of(render)["stores"])
    # The pod binds 0.0.0.0: the gateway's start-up check must accept that config.
    check_exposure(config, "0.0.0.0")


def test_stores_without_auth_are_refused(helm: str) -> None:
    render = template(
        helm,
        CHART / "ci" / "elasticsearch-apikey-values.yaml",
        sets=["config.server.auth=null"],
    )
    assert render.returncode != 0
    assert "config.server.auth" in render.stderr


# --- checksum ----------------------------------------------------------------


def test_checksum_changes_when_config_changes(helm: str) -> None:
    values = CI_VALUES[0]
    before = checksum(template(helm, values))
    assert re.fullmatch(r"[0-9a-f]{64}", before)
    assert checksum(template(helm, values)) == before
    changed = template(helm, values, sets=["config.server.request_timeout_ms=5000"])
    assert checksum(changed) != before
    store_changed = template(helm, values, set_strings=["config.stores.docs.index=docs-v2"])
    assert checksum(store_changed) != before


def test_checksum_ignores_changes_outside_config(helm: str) -> None:
    values = CI_VALUES[0]
    before = checksum(template(helm, values))
    other = template(helm, values, sets=["replicaCount=5", "resources.limits.memory=1Gi"])
    assert checksum(other) == before


# --- secrets never reach a ConfigMap -----------------------------------------

CREDENTIAL_KEY = re.compile(
    r"(?i)^(.*[_-])?(api[_-]?key|apikey|password|passwd|secret|token|secret[_-]access[_-]key|"
    r"private[_-]key|cloud[_-]id|credentials?)$"
)
REFERENCE = re.compile(r"^\$\{[^}]+\}$")


def _credential_values(node: Any, path: str = "config") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            where = f"{path}.{key}"
            if CREDENTIAL_KEY.match(str(key)) and not isinstance(value, dict | list):
                yield where, value
            yield from _credential_values(value, where)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _credential_values(value, f"{path}[{i}]")


@pytest.mark.parametrize("values", ALL_VALUES, ids=ALL_IDS)
def test_configmap_credentials_are_only_references(helm: str, values: Path | None) -> None:
    render = rendered(helm, values)
    for path, value in _credential_values(config_of(render)):
        assert isinstance(value, str), path
        assert REFERENCE.match(value), f"{path} is inline in the ConfigMap"
    for manifest in render.manifests:
        if manifest["kind"] == "ConfigMap":
            text = json.dumps(manifest)
            assert not re.search(r"://[^/@\s\"]+@", text), "user:password@ in a ConfigMap URL"


# Places a careless chart would copy into its ConfigMap. Each must be refused
# at render time, with a message naming the place and not the value.
ES_VALUES = CHART / "ci" / "elasticsearch-apikey-values.yaml"
LEAKY_SETTINGS: list[tuple[str, Path | None, str, str]] = [
    ("api_key", ES_VALUES, "config.stores.docs.connection.api_key", ""),
    ("password", ES_VALUES, "config.stores.docs.connection.password", ""),
    ("bearer_token", ES_VALUES, "config.stores.docs.connection.bearer_token", ""),
    ("cloud_id", ES_VALUES, "config.stores.docs.connection.cloud_id", ""),
    ("embedder_api_key", ES_VALUES, "config.stores.docs.search.embedder.api_key", ""),
    ("unknown_secret_key", ES_VALUES, "config.stores.docs.connection.client_secret", ""),
    ("server_token", ES_VALUES, "config.server.auth_token", ""),
    ("demo_store", None, "demoStore.connection.api_key", "config.stores.demo.connection.api_key"),
]


@pytest.mark.parametrize(
    ("label", "values", "setting", "shown"), LEAKY_SETTINGS, ids=[x[0] for x in LEAKY_SETTINGS]
)
def test_inline_credential_is_refused_without_leaking(
    helm: str, label: str, values: Path | None, setting: str, shown: str
) -> None:
    render = template(helm, values, set_strings=[f"{setting}={SENTINEL}"])
    assert render.returncode != 0, f"{label}: an inline credential was rendered"
    assert SENTINEL not in render.stdout
    assert SENTINEL not in render.stderr, "the error message repeats the secret"
    assert f"{shown or setting}: holds an inline credential" in render.stderr
    assert "existingSecret" in render.stderr


def test_credentials_in_a_url_are_refused(helm: str) -> None:
    values = CHART / "ci" / "elasticsearch-apikey-values.yaml"
    url = f"https://elastic:{SENTINEL}@quickstart-es-http.search.svc:9200"
    render = template(helm, values, set_strings=[f"config.stores.docs.connection.hosts[0]={url}"])
    assert render.returncode != 0
    assert SENTINEL not in render.stdout + render.stderr
    assert "config.stores.docs.connection.hosts[0] (user:password in a URL)" in render.stderr


def test_plain_env_never_reaches_a_configmap(helm: str) -> None:
    render = template(
        helm,
        CHART / "ci" / "qdrant-apikey-values.yaml",
        sets=["extraEnv[0].name=SOME_SETTING"],
        set_strings=[f"extraEnv[0].value={SENTINEL}"],
    )
    for manifest in render.manifests:
        if manifest["kind"] == "ConfigMap":
            assert SENTINEL not in json.dumps(manifest)


@pytest.mark.parametrize("values", CI_VALUES, ids=CI_IDS)
def test_existing_secret_is_mounted_read_only(helm: str, values: Path) -> None:
    render = rendered(helm, values)
    secret_name = yaml.safe_load(values.read_text()).get("existingSecret", "")
    volumes = [v for v in pod_spec(render)["volumes"] if "secret" in v]
    mounts = [m for m in gateway_container(render)["volumeMounts"] if m["mountPath"] == SECRET_DIR]
    if not secret_name:
        assert volumes == []
        assert mounts == []
        return
    assert volumes == [
        {"name": "secrets", "secret": {"secretName": secret_name, "defaultMode": 0o440}}
    ]
    assert mounts == [{"name": "secrets", "mountPath": SECRET_DIR, "readOnly": True}]


def test_secret_env_comes_from_the_existing_secret(helm: str) -> None:
    render = rendered(helm, CHART / "ci" / "qdrant-apikey-values.yaml")
    env = gateway_container(render)["env"]
    assert env == [
        {
            "name": "QDRANT_API_KEY",
            "valueFrom": {"secretKeyRef": {"name": "a2m-gateway-qdrant", "key": "qdrant-api-key"}},
        }
    ]


# --- values.schema.json and validateValues ------------------------------------

WRONG_TYPES = [
    ("replicaCount", [], ["replicaCount=two"]),
    ("containerPort", [], ["containerPort=http"]),
    ("probe_enabled", [], ["livenessProbe.enabled=yes"]),
    ("networkPolicy_enabled", [], ["networkPolicy.enabled=true"]),
    ("server_port", [], ["config.server.port=eighty"]),
    ("shutdown_grace", [], ["config.server.shutdown_grace_s=soon"]),
    (
        "hosts_not_list",
        [],
        [
            "config.stores.x.backend=elasticsearch",
            "config.stores.x.index=i",
            "config.stores.x.connection.hosts=es:9200",
        ],
    ),
    (
        "api_key_number",
        ["config.stores.x.connection.api_key=12345"],
        ["config.stores.x.backend=qdrant", "config.stores.x.index=i"],
    ),
    ("unknown_backend", [], ["config.stores.x.backend=mongodb", "config.stores.x.index=i"]),
    (
        "qdrant_with_aws_sigv4",
        [],
        [
            "config.stores.x.backend=qdrant",
            "config.stores.x.index=i",
            "config.stores.x.connection.url=http://q:6333",
            "config.stores.x.connection.aws_sigv4.region=eu-west-1",
        ],
    ),
    (
        "elasticsearch_with_sparse_vector",
        [],
        [
            "config.stores.x.backend=elasticsearch",
            "config.stores.x.index=i",
            "config.stores.x.search.sparse_vector=s",
        ],
    ),
    (
        "bad_store_name",
        [],
        ["config.stores.Bad_Name.backend=qdrant", "config.stores.Bad_Name.index=i"],
    ),
    ("typo_top_level", ["replicas=3"], []),
    ("existingSecret_map", ["existingSecret.name=creds"], []),
    ("pdb_string", [], ["pdb.maxUnavailable=one"]),
    ("secretEnv_missing_key", ["existingSecret=creds", "secretEnv[0].name=X"], []),
]


@pytest.mark.parametrize(
    ("label", "sets", "set_strings"), WRONG_TYPES, ids=[x[0] for x in WRONG_TYPES]
)
def test_schema_rejects_wrong_values(
    helm: str, label: str, sets: list[str], set_strings: list[str]
) -> None:
    render = template(helm, sets=sets, set_strings=set_strings)
    assert render.returncode != 0, f"{label} was accepted"
    assert "don't meet the specifications of the schema" in render.stderr, render.stderr


def _fields(model: type[BaseModel], part: str | None = None) -> set[str]:
    if part is not None:
        annotation = model.model_fields[part].annotation
        assert isinstance(annotation, type)
        assert issubclass(annotation, BaseModel)
        model = annotation
    return set(model.model_fields)


def test_schema_refuses_each_backend_the_keys_of_the_others() -> None:
    """values.schema.json's per-backend refusals are the gateway's own models' fields: every
    key another backend's model has and this one's lacks (unknown keys go to validateValues)."""
    from gateway.config.engines import STORE_MODELS

    store = json.loads((CHART / "values.schema.json").read_text())["definitions"]["store"]
    refused = {
        rule["if"]["properties"]["backend"]["const"]: rule["then"]["properties"]
        for rule in store["allOf"]
    }
    assert set(refused) == set(STORE_MODELS)
    for backend, model in STORE_MODELS.items():
        others = [m for b, m in STORE_MODELS.items() if b is not backend]
        then = refused[backend]
        for part in ("connection", "search"):
            foreign = set().union(*(_fields(o, part) for o in others)) - _fields(model, part)
            assert foreign, (backend, part)  # each backend has keys the others lack
            assert then[part]["properties"] == dict.fromkeys(foreign, False), (backend, part)
        top = set().union(*(_fields(o) for o in others)) - _fields(model)
        assert {k for k, v in then.items() if v is False} == top, backend


INCONSISTENT = [
    (
        "grace_too_short",
        CHART / "ci" / "elasticsearch-apikey-values.yaml",
        ["terminationGracePeriodSeconds=10"],
        "terminationGracePeriodSeconds (10) must exceed preStopSleepSeconds (5) + "
        "config.server.shutdown_grace_s (20)",
    ),
    (
        "file_ref_without_secret",
        CHART / "ci" / "elasticsearch-apikey-values.yaml",
        ["existingSecret="],
        f"config: references {SECRET_DIR}/es-api-key but existingSecret is not set",
    ),
    (
        "env_ref_undefined",
        CHART / "ci" / "qdrant-apikey-values.yaml",
        ["secretEnv=null"],
        "config: references ${QDRANT_API_KEY} but no secretEnv or extraEnv entry defines",
    ),
    (
        "secretEnv_without_secret",
        None,
        ["secretEnv[0].name=X", "secretEnv[0].key=x"],
        "secretEnv: needs existingSecret",
    ),
    (
        "engines_unknown",
        CHART / "ci" / "elasticsearch-apikey-values.yaml",
        ["networkPolicy.egress.engines=null"],
        "networkPolicy.egress.engines: the stores call remote endpoints (ports 9200)",
    ),
    (
        "pdb_both",
        None,
        ["pdb.minAvailable=1", "pdb.maxUnavailable=1"],
        "pdb: set either minAvailable or maxUnavailable, not both",
    ),
    (
        "hpa_bounds",
        None,
        ["autoscaling.enabled=true", "autoscaling.minReplicas=5", "autoscaling.maxReplicas=2"],
        "autoscaling: minReplicas must not exceed maxReplicas",
    ),
]


@pytest.mark.parametrize(
    ("label", "values", "sets", "message"), INCONSISTENT, ids=[x[0] for x in INCONSISTENT]
)
def test_validate_values_explains_the_problem(
    helm: str, label: str, values: Path | None, sets: list[str], message: str
) -> None:
    render = template(helm, values, sets=sets)
    assert render.returncode != 0, f"{label} was accepted"
    assert "VALUES VALIDATION:" in render.stderr
    assert message in render.stderr, render.stderr


# --- network policy, availability, scaling ------------------------------------


def _egress_ports(rule: dict[str, Any]) -> set[tuple[int, str]]:
    return {(int(p["port"]), str(p["protocol"])) for p in rule["ports"]}


@pytest.mark.parametrize("values", ALL_VALUES, ids=ALL_IDS)
def test_network_policy_allows_dns_and_engines_only(helm: str, values: Path | None) -> None:
    render = rendered(helm, values)
    policy = render.one("NetworkPolicy")["spec"]
    assert (
        policy["podSelector"]["matchLabels"]
        == render.one("Deployment")["spec"]["selector"]["matchLabels"]
    )
    assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"]
    dns, *engines = policy["egress"]
    assert _egress_ports(dns) == {(53, "UDP"), (53, "TCP")}
    for rule in policy["egress"]:
        # An entry without `to` or without `ports` would allow everything.
        assert rule.get("to"), rule
        assert rule.get("ports"), rule
    if values is None:
        assert engines == []
    else:
        assert engines
    for rule in policy["ingress"]:
        assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]


def test_network_policy_engine_ports_come_from_the_config(helm: str) -> None:
    es = rendered(helm, CHART / "ci" / "elasticsearch-apikey-values.yaml")
    (rule,) = es.one("NetworkPolicy")["spec"]["egress"][1:]
    assert _egress_ports(rule) == {(9200, "TCP")}
    aws = rendered(helm, CHART / "ci" / "opensearch-sigv4-irsa-values.yaml")
    (rule,) = aws.one("NetworkPolicy")["spec"]["egress"][1:]
    assert rule["to"] == [{"ipBlock": {"cidr": "10.0.0.0/16"}}]
    assert _egress_ports(rule) == {(443, "TCP")}
    qdrant = rendered(helm, CHART / "ci" / "qdrant-apikey-values.yaml")
    rules = qdrant.one("NetworkPolicy")["spec"]["egress"][1:]
    assert [_egress_ports(r) for r in rules] == [{(6333, "TCP")}, {(8080, "TCP")}]


PORT_DERIVATION = [
    ("es_https_no_port", "elasticsearch", "https://es.example.internal", 443),
    ("es_http_no_port", "elasticsearch", "http://es.example.internal", 80),
    ("os_http_no_port", "opensearch", "http://os.example.internal", 9200),
    ("es_host_port", "elasticsearch", "es.search.svc:9201", 9201),
    ("es_ipv6", "elasticsearch", "https://[fd00::1]:9243/prefix", 9243),
    ("qdrant_https_no_port", "qdrant", "https://xyz.cloud.qdrant.io", 6333),
    ("qdrant_grpc_port", "qdrant", "http://qdrant.qdrant.svc:6334", 6334),
]


@pytest.mark.parametrize(
    ("label", "backend", "endpoint", "port"), PORT_DERIVATION, ids=[x[0] for x in PORT_DERIVATION]
)
def test_engine_port_is_derived_like_the_clients_do(
    helm: str, label: str, backend: str, endpoint: str, port: int
) -> None:
    where = "url" if backend == "qdrant" else "hosts[0]"
    render = template(
        helm,
        set_strings=[
            f"config.stores.s.backend={backend}",
            "config.stores.s.index=i",
            f"config.stores.s.connection.{where}={endpoint}",
            "networkPolicy.egress.engines[0].cidr=10.0.0.0/8",
        ],
        sets=["config.server.auth.allow_unauthenticated_network=true"],
    )
    (rule,) = render.one("NetworkPolicy")["spec"]["egress"][1:]
    assert _egress_ports(rule) == {(port, "TCP")}, label


def test_network_policy_ingress_from_allowed_namespaces(helm: str) -> None:
    render = rendered(helm, CHART / "ci" / "qdrant-apikey-values.yaml")
    (rule,) = render.one("NetworkPolicy")["spec"]["ingress"]
    client_label = f"{FULLNAME}-client"
    assert rule["from"] == [
        {"podSelector": {"matchLabels": {client_label: "true"}}},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}},
    ]
    # The helm test pod carries the client label, so it is let in.
    assert hook_pod(render)["metadata"]["labels"][client_label] == "true"


def test_network_policy_can_be_disabled(helm: str) -> None:
    render = template(
        helm,
        CHART / "ci" / "elasticsearch-apikey-values.yaml",
        sets=["networkPolicy.enabled=false"],
    )
    assert "NetworkPolicy" not in render.kinds()


def test_hpa_replaces_replica_count(helm: str) -> None:
    render = rendered(helm, CHART / "ci" / "opensearch-sigv4-irsa-values.yaml")
    hpa = render.one("HorizontalPodAutoscaler")["spec"]
    assert hpa["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": FULLNAME,
    }
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (2, 6)
    assert "replicas" not in render.one("Deployment")["spec"]
    pdb = render.one("PodDisruptionBudget")["spec"]
    assert pdb["minAvailable"] == 1
    assert "maxUnavailable" not in pdb


def test_pdb_and_spread_select_the_gateway_pods(helm: str) -> None:
    render = rendered(helm, None)
    selector = render.one("Deployment")["spec"]["selector"]["matchLabels"]
    pod_labels = render.one("Deployment")["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= pod_labels.items()
    assert render.one("PodDisruptionBudget")["spec"]["selector"]["matchLabels"] == selector
    assert render.one("Service")["spec"]["selector"] == selector
    spread = pod_spec(render)["topologySpreadConstraints"]
    assert {c["topologyKey"] for c in spread} == {
        "topology.kubernetes.io/zone",
        "kubernetes.io/hostname",
    }
    for constraint in spread:
        assert constraint["labelSelector"] == {"matchLabels": selector}


def test_irsa_role_is_annotated_on_the_service_account(helm: str) -> None:
    render = rendered(helm, CHART / "ci" / "opensearch-sigv4-irsa-values.yaml")
    sa = render.one("ServiceAccount")
    assert sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].startswith("arn:aws:iam::")
    assert sa["automountServiceAccountToken"] is False


def test_service_monitor_scrapes_metrics(helm: str) -> None:
    render = rendered(helm, CHART / "ci" / "elasticsearch-apikey-values.yaml")
    monitor = render.one("ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    spec = monitor["spec"]
    assert spec["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert (
        spec["selector"]["matchLabels"].items()
        <= render.one("Service")["metadata"]["labels"].items()
    )
    (endpoint,) = spec["endpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("http", "/metrics")


def test_ingress_routes_to_the_service(helm: str) -> None:
    render = rendered(helm, CHART / "ci" / "qdrant-apikey-values.yaml")
    spec = render.one("Ingress")["spec"]
    assert spec["ingressClassName"] == "nginx"
    (rule,) = spec["rules"]
    paths = rule["http"]["paths"]
    # A2M, MCP and MCP's OAuth discovery document: one Service port, one server.auth.
    assert [p["path"] for p in paths] == ["/a2m", "/mcp", "/.well-known/oauth-protected-resource"]
    for path in paths:
        assert path["backend"] == {"service": {"name": FULLNAME, "port": {"name": "http"}}}


# --- the helm test hook -------------------------------------------------------


@pytest.mark.parametrize("values", ALL_VALUES, ids=ALL_IDS)
def test_hook_pod_uses_the_gateway_image_and_stays_out_of_the_service(
    helm: str, values: Path | None
) -> None:
    render = rendered(helm, values)
    pod = hook_pod(render)
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    (container,) = pod["spec"]["containers"]
    assert container["image"] == gateway_container(render)["image"]
    assert container["command"] == ["python3", "-c"]
    selector = render.one("Service")["spec"]["selector"]
    assert not selector.items() <= pod["metadata"]["labels"].items()
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    assert json.loads(env["A2M_STORES"]) == sorted(config_of(render)["stores"])
    # The test key, where configured, comes from the Secret, never from a plain value.
    for e in container["env"]:
        if e["name"] == "A2M_API_KEY":
            assert e["valueFrom"]["secretKeyRef"]["name"] == pod_secret_name(render)
    assert env["A2M_BASE_URL"] == f"http://{FULLNAME}:8080"


class FakeGateway:
    """A stand-in A2M server on the shared loopback peer: enough of /readyz and /a2m/{store}
    for the hook script."""

    def __init__(self, start: StartPeer) -> None:
        self.recall_error = False
        self.peer = start(self._answer)
        self.url = self.peer.url

    @property
    def seen(self) -> list[tuple[str, str]]:
        """(store, method) of each JSON-RPC call, in order."""
        posts = [r for r in self.peer.requests if r.method == "POST"]
        return [(r.path.removeprefix("/a2m/"), r.json()["method"]) for r in posts]

    @property
    def content_types(self) -> set[str | None]:
        return {r.headers.get("content-type") for r in self.peer.requests if r.method == "POST"}

    def _answer(self, request: PeerRequest) -> PeerReply:
        if request.method == "GET":
            return PeerReply.json({}, 200 if request.path == "/readyz" else 404)
        call = request.json()
        store = request.path.removeprefix("/a2m/")
        if call["method"] == "memory/describe":
            result: dict[str, Any] = {
                "protocol": "a2m/0.1",
                "name": store,
                "capabilities": ["core"],
                "methods": ["memory/describe", "memory/recall"],
            }
        elif self.recall_error:
            error = {
                "code": -32603,
                "message": "The search engine behind this store is unavailable",
                "data": {"reason": "engine_unavailable", "retryable": True, "retry_after_ms": 1000},
            }
            return PeerReply.json({"jsonrpc": "2.0", "id": call["id"], "error": error})
        else:
            result = {
                "records": [
                    {"id": "1", "content": "x", "score": 0.9},
                    {"id": "2", "content": "y", "score": 0.4},
                ]
            }
        return PeerReply.json({"jsonrpc": "2.0", "id": call["id"], "result": result})


@pytest.fixture
def fake_gateway(http_peer: StartPeer) -> FakeGateway:
    return FakeGateway(http_peer)


def run_hook_script(render: Render, base_url: str) -> subprocess.CompletedProcess[str]:
    (container,) = hook_pod(render)["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    env["A2M_BASE_URL"] = base_url
    env["A2M_TIMEOUT"] = "10"
    return subprocess.run(
        [sys.executable, "-c", container["args"][0]],
        env={**env, "PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_hook_script_makes_the_round_trip(helm: str, fake_gateway: FakeGateway) -> None:
    base_url, handler = fake_gateway.url, fake_gateway
    render = template(
        helm,
        CHART / "ci" / "elasticsearch-apikey-values.yaml",
        set_strings=[
            "config.stores.wiki.backend=elasticsearch",
            "config.stores.wiki.index=wiki",
            "config.stores.wiki.connection.hosts[0]=https://quickstart-es-http.search.svc:9200",
            "config.stores.wiki.mapping.content=body",
            "config.stores.wiki.search.text_fields[0]=body",
        ],
    )
    proc = run_hook_script(render, base_url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS describe + recall on 2 store(s)" in proc.stdout
    assert handler.seen == [
        ("docs", "memory/describe"),
        ("docs", "memory/recall"),
        ("wiki", "memory/describe"),
        ("wiki", "memory/recall"),
    ]
    assert handler.content_types == {"application/json"}


def test_hook_script_fails_on_a_json_rpc_error(helm: str, fake_gateway: FakeGateway) -> None:
    base_url, handler = fake_gateway.url, fake_gateway
    handler.recall_error = True
    proc = run_hook_script(rendered(helm, None), base_url)
    assert proc.returncode == 1
    assert "FAIL demo memory/recall: JSON-RPC error" in proc.stdout
    assert "-32603" in proc.stdout


def test_hook_script_fails_when_nothing_listens(helm: str) -> None:
    proc = run_hook_script(rendered(helm, None), "http://127.0.0.1:9")
    assert proc.returncode != 0


# --- NOTES.txt ----------------------------------------------------------------


def test_notes_show_how_to_call_describe(helm: str, tmp_path: Path) -> None:
    # `helm template` does not render NOTES.txt: copy the chart and wrap it in a
    # ConfigMap template so the exact text a user sees can be checked offline.
    chart = tmp_path / "a2m-gateway"
    shutil.copytree(CHART, chart)
    notes = (chart / "templates" / "NOTES.txt").read_text()
    (chart / "templates" / "_notes_for_test.tpl").write_text(
        '{{- define "test.notes" -}}\n' + notes + "\n{{- end }}\n"
    )
    (chart / "templates" / "notes-for-test.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\n"
        'data:\n  notes.txt: {{ include "test.notes" . | toJson }}\n'
    )
    render = template(helm, chart / "ci" / "elasticsearch-apikey-values.yaml", chart=chart)
    text = render.one("ConfigMap", "notes")["data"]["notes.txt"]
    assert f"kubectl -n {NAMESPACE} port-forward service/{FULLNAME} 8080:8080" in text
    assert "curl -s http://127.0.0.1:8080/a2m/docs" in text
    assert '{"jsonrpc":"2.0","id":1,"method":"memory/describe","params":{}}' in text
    assert f"helm test {RELEASE} -n {NAMESPACE} --logs" in text
    assert f"http://{FULLNAME}.{NAMESPACE}.svc:8080/a2m/docs" in text
    assert f"http://{FULLNAME}.{NAMESPACE}.svc:8080/mcp" in text
    assert "claude mcp add --transport http a2m http://127.0.0.1:8080/mcp" in text


# --- the image runs what the chart runs --------------------------------------


def _dockerfile_exec_form(instruction: str) -> list[str]:
    """The JSON array of the last ENTRYPOINT or CMD in the Dockerfile."""
    lines = (REPO / "Dockerfile").read_text().splitlines()
    found = [line for line in lines if line.startswith(instruction + " ")]
    assert found, f"no {instruction} in Dockerfile"
    value = json.loads(found[-1].removeprefix(instruction + " "))
    assert isinstance(value, list)
    return [str(v) for v in value]


def test_chart_command_is_the_images_entrypoint_and_cmd(helm: str) -> None:
    container = gateway_container(rendered(helm, None))
    image_command = _dockerfile_exec_form("ENTRYPOINT") + _dockerfile_exec_form("CMD")
    assert container["command"] + container["args"] == image_command


def test_chart_runs_as_the_images_user(helm: str) -> None:
    user = re.findall(r"^USER (\d+):(\d+)$", (REPO / "Dockerfile").read_text(), re.MULTILINE)
    assert user == [("10001", "10001")]
    sc = gateway_container(rendered(helm, None))["securityContext"]
    assert (sc["runAsUser"], sc["runAsGroup"]) == (10001, 10001)


# --- scripts/install-helm.sh -------------------------------------------------


def test_install_helm_pins_a_release_from_the_go_module_proxy() -> None:
    script = (REPO / "scripts" / "install-helm.sh").read_text()
    assert re.search(r'^HELM_VERSION="\$\{HELM_VERSION:-v3\.\d+\.\d+\}"$', script, re.M)
    assert 'go install -ldflags "${ldflags}" "${MODULE}/cmd/helm@${HELM_VERSION}"' in script
    assert 'MODULE="helm.sh/helm/v3"' in script


def test_install_helm_is_a_no_op_when_helm_is_present(helm: str) -> None:
    env = {**os.environ, "PATH": f"{Path(helm).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "install-helm.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "helm already on PATH" in proc.stderr


# --- the shared rate limit: an existing Redis or Valkey -----------------------

REDIS_SECRET_DIR = "/etc/a2m-gateway/ratelimit"
SHARED_QUOTA = [
    "config.server.rate_limit.requests_per_second=10",
    "sharedRateLimit.enabled=true",
    "sharedRateLimit.url=rediss://valkey.cache.svc:6380/2",
    "sharedRateLimit.passwordSecret.name=valkey-auth",
    "sharedRateLimit.onError=closed",
]


def test_shared_rate_limit_points_at_an_existing_redis(
    helm: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway.config import parse_config

    values = CHART / "ci" / "elasticsearch-apikey-values.yaml"
    render = template(helm, values, sets=SHARED_QUOTA)
    assert config_of(render)["server"]["rate_limit"] == {
        "requests_per_second": 10,
        "backend": "redis",
        "redis": {
            "url": "rediss://valkey.cache.svc:6380/2",
            "password": "${file:" + REDIS_SECRET_DIR + "/password}",
            "on_error": "closed",
            "timeout_ms": 100,
        },
    }
    # Only the password's key of its Secret, read-only; and no Redis of the chart's own.
    assert {
        "name": "ratelimit-secret",
        "secret": {
            "secretName": "valkey-auth",
            "defaultMode": 0o440,
            "items": [{"key": "password", "path": "password"}],
        },
    } in pod_spec(render)["volumes"]
    assert {
        "name": "ratelimit-secret",
        "mountPath": REDIS_SECRET_DIR,
        "readOnly": True,
    } in gateway_container(render)["volumeMounts"]
    assert render.kinds() == rendered(helm, values).kinds()
    assert "StatefulSet" not in render.kinds()
    (rule,) = render.one("NetworkPolicy")["spec"]["egress"][1:]
    assert _egress_ports(rule) == {(9200, "TCP"), (6380, "TCP")}
    # The gateway accepts the rendered config, the password read from the mounted file.
    text = render.one("ConfigMap", FULLNAME)["data"]["config.yaml"]
    (tmp_path / "password").write_text("stand-in\n")
    (tmp_path / "api-keys.yaml").write_text("[{subject: t, hash: 'sha256:" + "0" * 64 + "'}]\n")
    (tmp_path / "es-api-key").write_text("stand-in\n")
    text = text.replace(REDIS_SECRET_DIR + "/", str(tmp_path) + "/")
    text = text.replace(SECRET_DIR + "/", str(tmp_path) + "/")
    rate = parse_config(yaml.safe_load(text)).server.rate_limit
    assert rate is not None
    assert rate.redis is not None
    assert rate.redis.password is not None
    assert rate.redis.password.get_secret_value() == "stand-in"


def test_shared_rate_limit_is_off_by_default(helm: str) -> None:
    render = rendered(helm, None)
    assert "rate_limit" not in config_of(render)["server"]
    assert all(v["name"] != "ratelimit-secret" for v in pod_spec(render)["volumes"])


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (SHARED_QUOTA[1:], "sharedRateLimit: set config.server.rate_limit.requests_per_second"),
        (["sharedRateLimit.enabled=true"], "sharedRateLimit.url: set the redis:// URL"),
    ],
    ids=["no_quota", "no_url"],
)
def test_shared_rate_limit_needs_a_quota_and_a_url(
    helm: str, sets: list[str], message: str
) -> None:
    render = template(helm, CHART / "ci" / "elasticsearch-apikey-values.yaml", sets=sets)
    assert render.returncode != 0
    assert message in render.stderr, render.stderr


def test_schema_refuses_a_password_in_the_redis_url(helm: str) -> None:
    render = template(helm, sets=["sharedRateLimit.url=redis://:inline-password@valkey:6379/0"])
    assert render.returncode != 0
    assert "sharedRateLimit" in render.stderr
