"""Real servers for the integration tests (docs/infrastructure.md), one set per test session.

Where the servers come from, in order:

1. ``EBB_TEST_INFRA=docker`` or a Docker engine that answers a ping: testcontainers (Kafka,
   PostgreSQL, a KWOK cluster, moto), removed at session end.
2. Otherwise local processes (deploy/local/): servers already running under ``.infra/``
   (``make infra-up``; ``.infra/env.json``) are reused when they answer; any that are not are
   started by this session in its own directory ``.infra/sessions/<pid>/`` (so concurrent sessions
   never stop each other's servers) and stopped at session end. ``EBB_TEST_INFRA=local`` skips the
   Docker check.

A server that cannot be started fails the tests that need it, loudly; nothing is skipped (except Karpenter on
the Docker path, below).

The real Karpenter (its KWOK provider; deploy/local/karpenter.sh) runs on a Kubernetes control plane of its
own, ``.infra/sessions/<pid>/karpenter/``, started with the other servers when a collected test uses one of
its fixtures: its CRDs and controllers would change what the other tests see on the shared cluster (one
expects no karpenter.sh CRD; others install stand-ins of those CRDs). A Karpenter already running under
``.infra/`` (``deploy/local/infra.sh up karpenter``, on that cluster) is reused instead. On the Docker path
its tests are skipped: there is no published image of Karpenter's KWOK provider.

Karpenter fixtures, for tests of Karpenter itself and of ebb next to it:

- ``karpenter_cluster`` (session): ``KarpenterCluster`` with ``.kubeconfig`` (the cluster Karpenter runs
  on; point ebb's services at it), ``.metrics_url``, ``.health_url``, ``.audit_log`` (the API server's
  audit log of writes to Nodes and NodeClaims and of evictions, deploy/local/kubernetes.sh).
- ``karpenter_api`` (session): a kubernetes_asyncio ``ApiClient`` for that cluster.
- ``karpenter`` (per test): a ``KarpenterKit`` (tests/kit/karpenter_cluster.py) with the test's own
  namespace and run id: ``create_nodepool(suffix, budgets=..., consolidation_policy=...,
  consolidate_after=..., instance_types=...)``, ``create_pods(pool, n, cpu=...)``,
  ``wait_for_pods_running``, ``wait_for_nodeclaims(pool, n)``, ``delete_nodeclaim``, ``wait_until_gone``,
  ``metrics()`` (``Metrics.value(name, **labels)``). At teardown it deletes its pods, NodeClaims and
  NodePools and waits until Karpenter has removed their Nodes, so every test starts on an empty cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.kit.servers import REPO, AwsEndpoint, Infra, KafkaServer, KubernetesCluster, PostgresServer

if TYPE_CHECKING:  # imported by the fixtures that use them (karpenter_cluster pulls in the system-test harness)
    from tests.kit.karpenter_cluster import KarpenterCluster, KarpenterKit
    from tests.kit.system import Sandbox

DEPLOY = REPO / "deploy" / "local"
SHARED_INFRA_DIR = Path(os.environ.get("EBB_INFRA_DIR", REPO / ".infra"))

# Images for the Docker path (docker-compose.yml uses the same ones).
KAFKA_IMAGE = "apache/kafka:4.1.2"
POSTGRES_IMAGE = "postgres:17-alpine"
KWOK_CLUSTER_IMAGE = "registry.k8s.io/kwok/cluster:v0.7.0-k8s.v1.33.0"
MOTO_IMAGE = "motoserver/moto:5.1.4"

COMPONENTS = ("kafka", "postgres", "kubernetes", "moto", "karpenter")
#: the processes behind each local component (pid files in <infra dir>/pids/)
PROCESSES = {
    "kafka": ("kafka",),
    "postgres": ("postgres",),
    "kubernetes": ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"),
    "moto": ("moto",),
    "karpenter": ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "karpenter"),
}
#: the deploy/local scripts a session runs for a component, started in this order and stopped in reverse:
#: the session's Karpenter gets a control plane of its own
SCRIPTS = {"karpenter": ("kubernetes", "karpenter")}


# ------------------------------------------------------------------------------ local processes


def _tcp_open(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=2):
            return True
    except (OSError, ValueError):
        return False


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return bool(200 <= response.status < 300)
    except OSError:
        return False


def _pid_alive(infra_dir: Path, name: str) -> bool:
    try:
        pid = int((infra_dir / "pids" / f"{name}.pid").read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True


def _answers(component: str, env: dict[str, str], infra_dir: Path) -> bool:
    """Whether ``component``'s servers, as described by ``env``, are up and answering."""
    if not all(_pid_alive(infra_dir, p) for p in PROCESSES[component]):
        return False
    if component == "kafka":
        return "KAFKA_BOOTSTRAP" in env and _tcp_open(env["KAFKA_BOOTSTRAP"])
    if component == "postgres":
        return "PGPORT" in env and _tcp_open(f"127.0.0.1:{env['PGPORT']}")
    if component == "moto":
        return "MOTO_ENDPOINT" in env and _http_ok(f"{env['MOTO_ENDPOINT']}/moto-api/data.json")
    if component == "kubernetes":
        api = env.get("KUBE_API_SERVER", "")
        return (
            Path(env.get("KUBECONFIG", "/nonexistent")).is_file()
            and api.startswith("https://")
            and _tcp_open(api.removeprefix("https://"))
        )
    if component == "karpenter":
        return (
            Path(env.get("KARPENTER_KUBECONFIG", "/nonexistent")).is_file()
            and env.get("KARPENTER_KUBE_API_SERVER") == env.get("KUBE_API_SERVER")
            and _http_ok(env.get("KARPENTER_HEALTH_URL", "http://127.0.0.1:1/"))
        )
    raise ValueError(component)


def _read_env(infra_dir: Path) -> dict[str, str]:
    try:
        data = json.loads((infra_dir / "env.json").read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()}


class LocalInfra:
    """Servers as local processes through deploy/local/<component>.sh."""

    kind = "local"

    def __init__(self, shared_dir: Path, output: Callable[[], contextlib.AbstractContextManager[Any]]):
        self.shared_dir = shared_dir
        self.own_dir = shared_dir / "sessions" / str(os.getpid())
        self._output = output
        self.started: list[str] = []
        self.failed: dict[str, str] = {}

    def prepare(self, components: Iterable[str]) -> None:
        """Start, in parallel, those of ``components`` that are not already up and answering
        under the shared directory."""
        shared = _read_env(self.shared_dir)
        missing = [
            c
            for c in components
            if c not in self.started and c not in self.failed and not _answers(c, shared, self.shared_dir)
        ]
        if not missing:
            return
        self.own_dir.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        # Stream the scripts' progress to the terminal: a first run may build Kubernetes.
        with self._output():
            print(f"\n[ebb tests] starting {', '.join(missing)} under {self.own_dir}", flush=True)
            processes = {c: self._run_scripts(c, "start") for c in missing}
            for component, process in processes.items():
                self.started.append(component)
                if process.wait() != 0:
                    scripts = ", ".join(f"deploy/local/{s}.sh" for s in SCRIPTS.get(component, (component,)))
                    self.failed[component] = (
                        f"{scripts} start failed (exit {process.returncode}); logs in {self._dir(component) / 'logs'}"
                    )
            print(f"[ebb tests] servers up in {time.monotonic() - began:.1f}s", flush=True)

    def settings(self, component: str) -> dict[str, str]:
        shared = _read_env(self.shared_dir)
        if component not in self.started and _answers(component, shared, self.shared_dir):
            return shared
        self.prepare([component])
        if component in self.failed:
            raise RuntimeError(self.failed[component])
        own_dir = self._dir(component)
        own = _read_env(own_dir)
        if not _answers(component, own, own_dir):
            raise RuntimeError(f"{component} was started but does not answer; logs in {own_dir / 'logs'}")
        return own

    def _dir(self, component: str) -> Path:
        """The infra dir of this session's ``component`` (Karpenter's control plane is one of its own)."""
        return self.own_dir / component if component in SCRIPTS else self.own_dir

    def _script_env(self, component: str) -> dict[str, str]:
        return {**os.environ, "EBB_INFRA_DIR": str(self._dir(component))}

    def _run_scripts(self, component: str, action: str) -> subprocess.Popen[bytes]:
        """``deploy/local/<script>.sh <action>`` for each of the component's scripts, in order for start and
        in reverse for stop; a failed start stops the chain, a failed stop does not."""
        scripts = [str(DEPLOY / f"{s}.sh") for s in SCRIPTS.get(component, (component,))]
        if action == "stop":
            scripts.reverse()
        chain = 'rc=0; for s in "${@:2}"; do "$s" "$1" || { rc=$?; [[ "$1" == stop ]] || break; }; done; exit "$rc"'
        return subprocess.Popen(
            ["bash", "-c", chain, "_", action, *scripts], env=self._script_env(component), stdin=subprocess.DEVNULL
        )

    def close(self, *, keep_state: bool) -> None:
        if not self.started:
            return
        with self._output():
            print(f"\n[ebb tests] stopping {', '.join(self.started)}", flush=True)
            processes = [self._run_scripts(c, "stop") for c in self.started]
            for process in processes:
                process.wait()
            if keep_state:
                print(f"[ebb tests] servers stopped; their logs are kept in {self.own_dir / 'logs'}")
        if not keep_state:
            shutil.rmtree(self.own_dir, ignore_errors=True)
            with contextlib.suppress(OSError):
                self.own_dir.parent.rmdir()


# ------------------------------------------------------------------------------ testcontainers


def docker_answers() -> bool:
    """A Docker engine answers a ping (not merely: a docker client is installed)."""
    try:
        import docker

        client = docker.from_env(timeout=5)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready after {timeout:.0f}s")
        time.sleep(0.5)


class DockerInfra:
    """Servers as containers through testcontainers (used when a Docker engine answers)."""

    kind = "docker"

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.containers: list[Any] = []
        self.cache: dict[str, dict[str, str]] = {}

    def prepare(self, components: Iterable[str]) -> None:
        for component in components:
            if component == "karpenter":  # not on this path: its fixtures skip
                continue
            with contextlib.suppress(Exception):  # a failure is raised again by settings()
                self.settings(component)

    def settings(self, component: str) -> dict[str, str]:
        if component not in self.cache:
            self.cache[component] = getattr(self, f"_start_{component}")()
        return self.cache[component]

    def _run(self, container: Any) -> Any:
        container.start()
        self.containers.append(container)
        return container

    def _start_kafka(self) -> dict[str, str]:
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.wait_strategies import LogMessageWaitStrategy

        port = _free_port()
        container = DockerContainer(KAFKA_IMAGE)
        # the advertised listener must name the host and port that clients will use, known
        # before the start: bind a free host port; the host is the Docker host's
        try:
            host = container.get_container_host_ip()
        except Exception:  # connection modes that need a running container
            host = "localhost"
        env = {
            "KAFKA_NODE_ID": "1",
            "KAFKA_PROCESS_ROLES": "broker,controller",
            "KAFKA_LISTENERS": "PLAINTEXT://:9092,CONTROLLER://:9093",
            "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://{host}:{port}",
            "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
            "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
            "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
            "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
            "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
            "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR": "1",
            "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        }
        for key, value in env.items():
            container.with_env(key, value)
        container.with_bind_ports(9092, port)
        container.waiting_for(LogMessageWaitStrategy("Kafka Server started").with_startup_timeout(120))
        self._run(container)
        return {"KAFKA_BOOTSTRAP": f"{host}:{port}"}

    def _start_postgres(self) -> dict[str, str]:
        from testcontainers.postgres import PostgresContainer

        container = self._run(
            PostgresContainer(POSTGRES_IMAGE, username="ebb", password="ebb", dbname="ebb", driver="asyncpg")
        )
        return {"DATABASE_URL": str(container.get_connection_url())}

    def _start_kubernetes(self) -> dict[str, str]:
        # The KWOK cluster image runs etcd, kube-apiserver, kube-controller-manager,
        # kube-scheduler and kwok (managing nodes annotated kwok.x-k8s.io/node=fake), and
        # serves the API without authentication through `kubectl proxy` on port 8080.
        from testcontainers.core.container import DockerContainer

        container = self._run(DockerContainer(KWOK_CLUSTER_IMAGE).with_exposed_ports(8080))
        server = f"http://{container.get_container_host_ip()}:{container.get_exposed_port(8080)}"
        _wait("KWOK cluster", lambda: _http_ok(f"{server}/readyz"), 180)
        _wait(
            "default ServiceAccount",
            lambda: _http_ok(f"{server}/api/v1/namespaces/default/serviceaccounts/default"),
            120,
        )
        kubeconfig = self.tmp / "kwok.kubeconfig"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: kwok\n  cluster:\n    server: {server}\n"
            "users:\n- name: kwok\n  user: {}\n"
            "contexts:\n- name: kwok\n  context:\n    cluster: kwok\n    user: kwok\n"
            "current-context: kwok\n"
        )
        return {"KUBECONFIG": str(kubeconfig), "KUBE_API_SERVER": server}

    def _start_moto(self) -> dict[str, str]:
        from testcontainers.core.container import DockerContainer

        container = self._run(DockerContainer(MOTO_IMAGE).with_exposed_ports(5000))
        endpoint = f"http://{container.get_container_host_ip()}:{container.get_exposed_port(5000)}"
        _wait("moto", lambda: _http_ok(f"{endpoint}/moto-api/data.json"), 60)
        return {"MOTO_ENDPOINT": endpoint}

    def close(self, *, keep_state: bool) -> None:
        for container in reversed(self.containers):
            with contextlib.suppress(Exception):
                container.stop()


# ------------------------------------------------------------------------------ fixtures


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


#: fixture name → the component it needs
FIXTURE_COMPONENTS = {
    "kafka_server": "kafka",
    "postgres_server": "postgres",
    "kubernetes_cluster": "kubernetes",
    "kube_api": "kubernetes",
    "aws_endpoint": "moto",
    "karpenter_cluster": "karpenter",
    "karpenter_api": "karpenter",
    "karpenter": "karpenter",
}


def _needed_components(items: list[pytest.Item]) -> list[str]:
    """The components the collected tests need, so they can be started together."""
    names: set[str] = set()
    for item in items:
        names.update(getattr(item, "fixturenames", ()))
    return [c for c in COMPONENTS if any(FIXTURE_COMPONENTS[f] == c for f in names & FIXTURE_COMPONENTS.keys())]


@pytest.fixture(scope="session")
def infra(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Infra]:
    """Where this session's servers come from: testcontainers or local processes."""
    choice = os.environ.get("EBB_TEST_INFRA", "auto")
    if choice not in {"auto", "docker", "local"}:
        raise pytest.UsageError(f"EBB_TEST_INFRA must be auto, docker or local, not {choice!r}")
    use_docker = choice == "docker" or (choice == "auto" and docker_answers())
    provider: LocalInfra | DockerInfra
    if use_docker:
        provider = DockerInfra(tmp_path_factory.mktemp("docker-infra"))
    else:
        capture = request.config.pluginmanager.getplugin("capturemanager")

        def output() -> contextlib.AbstractContextManager[Any]:
            if capture is None:
                return contextlib.nullcontext()
            return capture.global_and_fixture_disabled()  # type: ignore[no-any-return]

        provider = LocalInfra(SHARED_INFRA_DIR, output)
    try:
        provider.prepare(_needed_components(request.session.items))
        yield provider
    finally:
        failed = request.session.testsfailed > 0
        provider.close(keep_state=failed)


@pytest.fixture(scope="session")
def kafka_server(infra: Infra) -> KafkaServer:
    return KafkaServer(bootstrap=infra.settings("kafka")["KAFKA_BOOTSTRAP"])


@pytest.fixture(scope="session")
def postgres_server(infra: Infra) -> PostgresServer:
    return PostgresServer(url=infra.settings("postgres")["DATABASE_URL"])


@pytest.fixture(scope="session")
def kubernetes_cluster(infra: Infra) -> KubernetesCluster:
    return KubernetesCluster(kubeconfig=Path(infra.settings("kubernetes")["KUBECONFIG"]))


@pytest.fixture(scope="session")
def aws_endpoint(infra: Infra) -> AwsEndpoint:
    return AwsEndpoint(endpoint_url=infra.settings("moto")["MOTO_ENDPOINT"])


@pytest.fixture(scope="session")
async def kube_api(kubernetes_cluster: KubernetesCluster) -> AsyncIterator[Any]:
    """A kubernetes_asyncio ApiClient for the test cluster."""
    from kubernetes_asyncio import client, config

    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubernetes_cluster.kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        yield api


@pytest.fixture
async def box(kube_api: Any, kubernetes_cluster: KubernetesCluster, kafka_server: KafkaServer,
              postgres_server: PostgresServer, aws_endpoint: AwsEndpoint, tmp_path: Path) -> AsyncIterator[Sandbox]:
    """ebb's five services as processes on the shared servers (tests.kit.system.sandbox), stopped after the test."""
    from tests.kit.system import sandbox

    async with sandbox(kube_api, kafka_server.bootstrap, postgres_server.url, str(kubernetes_cluster.kubeconfig),
                       aws_endpoint.endpoint_url, aws_endpoint.region, tmp_path / "logs") as made:
        yield made


@pytest.fixture(scope="session")
def karpenter_cluster(infra: Infra) -> KarpenterCluster:
    """A Kubernetes control plane with the real Karpenter on it (see the module docstring)."""
    if infra.kind == "docker":
        pytest.skip(
            "Karpenter's KWOK provider has no published image, so it runs only on the local-process "
            "infrastructure: EBB_TEST_INFRA=local (deploy/local/karpenter.sh builds it with Go)"
        )
    from tests.kit.karpenter_cluster import KarpenterCluster

    settings = infra.settings("karpenter")
    return KarpenterCluster(
        kubeconfig=Path(settings["KARPENTER_KUBECONFIG"]),
        metrics_url=settings["KARPENTER_METRICS_URL"],
        health_url=settings["KARPENTER_HEALTH_URL"],
        audit_log=Path(settings["KUBE_AUDIT_LOG"]) if settings.get("KUBE_AUDIT_LOG") else None,
    )


@pytest.fixture(scope="session")
async def karpenter_api(karpenter_cluster: KarpenterCluster) -> AsyncIterator[Any]:
    """A kubernetes_asyncio ApiClient for the cluster Karpenter runs on."""
    from kubernetes_asyncio import client, config

    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(karpenter_cluster.kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        yield api


@pytest.fixture
async def karpenter(karpenter_cluster: KarpenterCluster, karpenter_api: Any) -> AsyncIterator[KarpenterKit]:
    """One test's ``KarpenterKit``: its namespace made, and everything it made removed at teardown (Nodes
    waited out), so tests do not see each other's NodePools, NodeClaims, Nodes or pods."""
    from tests.kit.karpenter_cluster import KarpenterKit

    kit = KarpenterKit(karpenter_cluster, karpenter_api)
    await kit.setup()
    try:
        yield kit
    finally:
        await kit.cleanup()
