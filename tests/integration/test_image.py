"""The container image, built here without a Docker engine (deploy/image/build.sh: mmdebstrap and the workspace's
wheels, an OCI archive) and run with podman as Kubernetes runs it: the manifests' security context (uid 65532 from
the image, a read-only root filesystem with a tmpfs on /tmp, every capability dropped, no privilege escalation),
the migrations Job's command (``ebb db upgrade``) on a new database, then each of the five services' entry points
(``python -m ebb_<service>``) on the real Kafka, PostgreSQL, kube-apiserver and moto SQS, each answering
``/healthz`` and then ``/readyz`` (its servers answer and it has started) on the port its probes use.

The archive is built once per set of inputs (``~/.cache/ebb/image/<key>/``; cold, a few minutes) and loaded into
podman's store. Marked ``image`` (with ``integration``): ``pytest -m image`` runs it alone. It needs root, Debian's
mmdebstrap and podman (.ci/run installs them); without them it fails, naming what is missing.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiobotocore.session import get_session

from ebb.adapters.store.migrate import head_revision
from tests.kit.servers import REPO, AwsEndpoint, KafkaServer, KubernetesCluster, PostgresServer
from tests.kit.system import (
    Servers,
    SystemSettings,
    create_database,
    drop_database,
    free_port,
    install_karpenter_crds,
    remove_crds,
    service_env,
)
from tests.kit.waiting import eventually

pytestmark = pytest.mark.image

BUILD = REPO / "deploy" / "image" / "build.sh"
#: service → (module, the variable of its probes' port); the decisions-api serves them on its API port
SERVICES = {
    "cluster-watcher": ("ebb_cluster_watcher", "METRICS_PORT"),
    "consolidation-planner": ("ebb_consolidation_planner", "METRICS_PORT"),
    "termination-executor": ("ebb_termination_executor", "METRICS_PORT"),
    "interruption-ingester": ("ebb_interruption_ingester", "METRICS_PORT"),
    "decisions-api": ("ebb_decisions_api", "PORT"),
}


@dataclass(frozen=True)
class Image:
    archive: Path
    digest: str
    #: how this machine's podman runs a container: podman's options (the runtime), ``podman run``'s (the limits)
    podman: tuple[str, ...]
    limits: tuple[str, ...]

    @property
    def reference(self) -> str:
        return f"{_repository()}@{self.digest}"


def _needs(*commands: str) -> None:
    missing = [c for c in commands if shutil.which(c) is None]
    if missing:
        pytest.fail(f"the image test needs {', '.join(missing)} (apt-get install {' '.join(missing)}; .ci/run does)")
    if os.geteuid() != 0:
        pytest.fail("deploy/image/build.sh needs root (mmdebstrap's root mode, chroot)")


def _run(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)


def _how_podman_runs(reference: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The options with which a container of ``reference`` runs here. The limits are this process's own (podman
    would raise the number of open files to a million, which a sandboxed machine refuses; the process limit is
    lowered, never raised); the runtime is podman's default, else runc (crun refuses a hybrid cgroup hierarchy)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limits = ("--ulimit", f"nofile={soft}:{hard}", "--ulimit", "nproc=4096:4096")
    tried: list[str] = []
    for runtime in ((), ("--runtime", "runc")):
        done = _run(["podman", *runtime, "run", "--rm", *limits, reference, "true"])
        if done.returncode == 0:
            return runtime, limits
        tried.append(f"{' '.join(runtime) or 'the default runtime'}: {done.stderr.strip()}")
    pytest.fail("podman runs no container here:\n" + "\n".join(tried))


@pytest.fixture(scope="module")
def image() -> Image:
    """The image of this checkout: built (or found in the cache) and loaded into podman."""
    _needs("mmdebstrap", "podman")
    built = _run([str(BUILD), "build"], timeout=1800)
    assert built.returncode == 0, f"deploy/image/build.sh failed:\n{built.stderr[-4000:]}"
    archive, digest = built.stdout.split()
    if _run(["podman", "image", "exists", f"{_repository()}@{digest}"]).returncode != 0:  # loaded by an earlier run
        # the image of earlier sources goes (unless a container still uses it): one at a time in podman's store
        _run(["podman", "rmi", _manifests_image()])
        loaded = _run(["podman", "load", "--quiet", "--input", archive], timeout=600)
        assert loaded.returncode == 0, loaded.stderr
    # the archive names the image as the manifests pull it
    assert _run(["podman", "image", "exists", _manifests_image()]).returncode == 0, _manifests_image()
    return Image(Path(archive), digest, *_how_podman_runs(f"{_repository()}@{digest}"))


def _manifests_image() -> str:
    """The image the manifests run (deploy/kubernetes), ``repository:tag``."""
    text = (REPO / "deploy/kubernetes/services/cluster-watcher.yaml").read_text()
    (line,) = {line.strip() for line in text.splitlines() if line.strip().startswith("image: ")}
    return line.removeprefix("image: ")


def _repository() -> str:
    return _manifests_image().rsplit(":", 1)[0]


class Containers:
    """The containers of one test, as the manifests run the image; removed at the end."""

    def __init__(self, image: Image) -> None:
        self.image = image
        self.names: list[str] = []
        self.run_id = uuid.uuid4().hex[:8]

    def run(self, *command: str, env: dict[str, str], mounts: dict[Path, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run ``command`` in a container of its own until it exits."""
        return _run(["podman", *self.image.podman, "run", "--rm", *self._options(env, mounts or {}),
                     self.image.reference, *command], timeout=timeout)

    def start(self, name: str, *command: str, env: dict[str, str], mounts: dict[Path, str] | None = None) -> str:
        """Start ``command`` in the background, in a container named after ``name``; the container's name."""
        container = f"ebb-image-{self.run_id}-{name}"
        done = _run(["podman", *self.image.podman, "run", "--detach", "--name", container,
                     *self._options(env, mounts or {}), self.image.reference, *command])
        assert done.returncode == 0, done.stderr
        self.names.append(container)
        return container

    def logs(self, container: str) -> str:
        done = _run(["podman", "logs", "--tail", "40", container])
        return done.stdout + done.stderr

    def state(self, container: str) -> str:
        return _run(["podman", "inspect", "--format", "{{.State.Status}} exit {{.State.ExitCode}}", container]).stdout

    def remove(self) -> dict[str, int]:
        """Stop every container (SIGTERM, as the kubelet does; SIGKILL after 30 s) and remove it; the exit codes."""
        codes: dict[str, int] = {}
        for container in self.names:
            _run(["podman", *self.image.podman, "stop", "--time", "30", container], timeout=60)
            exited = _run(["podman", "inspect", "--format", "{{.State.ExitCode}}", container]).stdout.strip()
            codes[container] = int(exited) if exited.lstrip("-").isdigit() else -1
            _run(["podman", *self.image.podman, "rm", "--force", container], timeout=60)
        self.names.clear()
        return codes

    def _options(self, env: dict[str, str], mounts: dict[Path, str]) -> list[str]:
        """The manifests' pod: the host's network (the servers listen on 127.0.0.1), a read-only root filesystem
        with a tmpfs on /tmp, no capability, no privilege escalation; the image's own user."""
        out = [*self.image.limits, "--network", "host", "--read-only", "--tmpfs", "/tmp", "--cap-drop", "all",
               "--security-opt", "no-new-privileges"]
        for key, value in env.items():
            out += ["--env", f"{key}={value}"]
        for source, target in mounts.items():
            out += ["--volume", f"{source}:{target}:ro"]
        return out


@pytest.fixture
def containers(image: Image) -> Iterator[Containers]:
    made = Containers(image)
    try:
        yield made
    finally:
        made.remove()


def _http(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except OSError as e:
        return 0, str(e)


@contextlib.asynccontextmanager
async def _world(kube_api: Any, postgres: PostgresServer, aws: AwsEndpoint) -> AsyncIterator[tuple[str, str, str]]:
    """A new database (not migrated: the image's migrations do it), an SQS queue, the Karpenter CRDs; removed after.
    Yields the run id, the database's URL and the queue's URL."""
    run = uuid.uuid4().hex[:8]
    database = f"ebb_image_{run}"
    async with get_session().create_client("sqs", endpoint_url=aws.endpoint_url, region_name=aws.region,
                                           aws_access_key_id="testing", aws_secret_access_key="testing") as sqs:
        queue_url = (await sqs.create_queue(QueueName=f"ebb-image-{run}"))["QueueUrl"]
        database_url = await create_database(postgres.url, database, migrate=False)
        crds = await install_karpenter_crds(kube_api)
        try:
            yield run, database_url, queue_url
        finally:
            with contextlib.suppress(Exception):
                await sqs.delete_queue(QueueUrl=queue_url)
            await drop_database(postgres.url, database)
            await remove_crds(kube_api, crds)


def test_the_image_has_the_dockerfiles_layout(image: Image, containers: Containers) -> None:
    """What the Dockerfile says of its image (user, working directory, command, PATH) is this image's config, and
    its default command, the CLI's help, runs as that user."""
    inspected = _run(["podman", "image", "inspect", image.reference])
    assert inspected.returncode == 0, inspected.stderr
    (found,) = json.loads(inspected.stdout)
    config = found["Config"]
    dockerfile = (REPO / "Dockerfile").read_text().splitlines()
    said = {line.split(None, 1)[0]: line.split(None, 1)[1] for line in dockerfile
            if line.split(None, 1)[:1] in (["USER"], ["WORKDIR"], ["CMD"])}
    assert config["User"] == said["USER"]
    assert config["WorkingDir"] == said["WORKDIR"]
    assert config["Cmd"] == json.loads(said["CMD"])
    assert any(e.startswith("PATH=/app/.venv/bin:") for e in config["Env"])
    assert any(line.startswith("ENV PATH=/app/.venv/bin:$PATH") for line in dockerfile)

    done = containers.run("sh", "-c", 'id -u; id -g; readlink -f "$(command -v python)"; ebb --help', env={})
    assert done.returncode == 0, done.stderr
    uid, gid, python, *_ = done.stdout.splitlines()
    assert (uid, gid) == ("65532", "65532")
    assert python == "/usr/bin/python3.11"
    assert "db" in done.stdout and "plan" in done.stdout


def test_every_compiled_extension_of_the_image_finds_its_libraries(image: Image, containers: Containers) -> None:
    """The wheels' shared objects (greenlet's, numpy's, asyncpg's, ...) and Python's own link only libraries the
    image has: one missing fails at the first import of its module, perhaps far into a service's life."""
    done = containers.run("sh", "-c", 'find /app/.venv /usr/lib/python3.11 -name "*.so*" -type f | while read -r f; do '
                          'ldd "$f" | grep "not found" | sed "s|^|$f: |"; done; echo checked', env={})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "checked", done.stdout


async def test_each_service_of_the_image_starts_and_answers_its_probes(
        image: Image, containers: Containers, kube_api: Any, kafka_server: KafkaServer,
        postgres_server: PostgresServer, kubernetes_cluster: KubernetesCluster, aws_endpoint: AwsEndpoint,
        tmp_path: Path) -> None:
    # the kubeconfig as a Secret would mount it: readable by the image's user (the local one is root's alone)
    kubeconfig = tmp_path / "kubeconfig"
    shutil.copyfile(kubernetes_cluster.kubeconfig, kubeconfig)
    kubeconfig.chmod(0o644)
    mounts = {kubeconfig: "/etc/ebb/kubeconfig"}
    async with _world(kube_api, postgres_server, aws_endpoint) as (run, database_url, queue_url):
        # the migrations Job: `ebb db upgrade` with EBB_DATABASE_URL
        migrated = containers.run("ebb", "db", "upgrade", env={"EBB_DATABASE_URL": database_url})
        assert migrated.returncode == 0, migrated.stderr
        assert f"database at revision {head_revision()}" in migrated.stdout

        servers = Servers(kafka_bootstrap=kafka_server.bootstrap, database_url=database_url,
                          kubeconfig="/etc/ebb/kubeconfig", aws_endpoint=aws_endpoint.endpoint_url,
                          aws_region=aws_endpoint.region)
        settings = SystemSettings(run=f"img{run}", queue_url=queue_url)
        ports: dict[str, int] = {}
        started: dict[str, str] = {}
        for name, (module, port_variable) in SERVICES.items():
            env = service_env(name, servers, settings)
            prefix = "EBB_" + name.upper().replace("-", "_") + "_"
            ports[name] = free_port()
            env |= {prefix + port_variable: str(ports[name]), prefix + "LOG_LEVEL": "info"}
            if name == "decisions-api":
                env[prefix + "HOST"] = "0.0.0.0"
            started[name] = containers.start(name, "python", "-m", module, env=env, mounts=mounts)

        for name, container in started.items():
            for probe in ("healthz", "readyz"):
                url = f"http://127.0.0.1:{ports[name]}/{probe}"

                def answered(u: str = url) -> bool:
                    return _http(u)[0] == 200

                def why(u: str = url, c: str = container) -> str:
                    return f"{u}: {_http(u)}\n{containers.state(c)}\n{containers.logs(c)}"

                await eventually(f"{name} /{probe}", answered, within=180, interval=1, on_timeout=why)

        # each one stops gracefully on SIGTERM (the kubelet's stop), with exit 0
        codes = containers.remove()
        assert set(codes.values()) == {0}, codes
