"""A small harness for the system tests (tests/integration/test_system.py): the five services as separate
``python -m`` processes with their logs in files, an aiokafka reader of raw topic records, a freshly created and
migrated PostgreSQL database, the Karpenter CRDs, NodePools and KWOK nodes (waiting is tests/kit/waiting.py's).

Everything here is built for isolation: each test makes its own topic prefix, database, cluster name, Lease,
NodePool and node names (from one random ``run`` id) and removes what it created.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self, TypeVar, cast

import aiohttp
import asyncpg  # type: ignore[import-untyped]
from aiokafka import AIOKafkaConsumer, TopicPartition
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from sqlalchemy.engine import make_url

from ebb.adapters.bus import KafkaBus
from ebb.adapters.store.migrate import upgrade_async
from ebb.contracts import ContractError, DeadLetter, DisruptionEvent, decode, from_kafka
from tests.kit.waiting import eventually

KWOK = "kwok.x-k8s.io/node"
#: every object a system test creates carries this label with the test's run id
RUN_LABEL = "ebb.sh/system-test"
KARPENTER = "karpenter.sh"
DISRUPTED_TAINT = "karpenter.sh/disrupted"


async def run_until_logged(module: str, env: Mapping[str, str], event: str, *, within: float = 30,
                           settle: float = 0.0) -> tuple[int | None, list[dict[str, Any]]]:
    """Run ``python -m module`` until it logs ``event`` (its stderr is JSON lines), wait ``settle`` seconds,
    stop it with SIGTERM, and return its exit status and every log line. Killed if it does not stop."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", module, env=dict(env), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    assert process.stderr is not None
    lines: list[dict[str, Any]] = []
    try:
        async with asyncio.timeout(within):
            while not any(line.get("event") == event for line in lines):
                raw = await process.stderr.readline()
                assert raw, f"{module} ended before logging {event!r}: {lines}"
                lines.append(json.loads(raw))
        await asyncio.sleep(settle)
        process.send_signal(signal.SIGTERM)
        _, rest = await asyncio.wait_for(process.communicate(), 20)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    lines.extend(json.loads(raw) for raw in rest.splitlines() if raw.strip())
    return process.returncode, lines


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------------------------------- processes


class ServiceProcess:
    """One ``python -m <module>`` with its stdout and stderr in ``<log_dir>/<name>.<n>.log`` (one file per
    start, so a restarted service keeps the log of its previous life)."""

    def __init__(self, name: str, module: str, env: Mapping[str, str], log_dir: Path) -> None:
        self.name = name
        self.module = module
        self.env = dict(env)
        self.log_dir = log_dir
        self.starts = 0
        self.process: asyncio.subprocess.Process | None = None
        self.log_path: Path | None = None
        self._log: IO[bytes] | None = None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def start(self, **overrides: str) -> None:
        """Start (again), with ``overrides`` of the environment for this and later starts."""
        assert not self.alive, f"{self.name} is running"
        self.env.update(overrides)
        self.starts += 1
        self.log_path = self.log_dir / f"{self.name}.{self.starts}.log"
        self._log = self.log_path.open("wb")
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", self.module, env={**os.environ, **self.env}, stdin=asyncio.subprocess.DEVNULL,
            stdout=self._log, stderr=asyncio.subprocess.STDOUT)

    def lines(self, every_start: bool = False) -> list[dict[str, Any]]:
        """The JSON log lines of the current start (or of every start), other lines as ``{"raw": ...}``."""
        paths = sorted(self.log_dir.glob(f"{self.name}.*.log")) if every_start else [self.log_path]
        out: list[dict[str, Any]] = []
        for path in paths:
            if path is None or not path.exists():
                continue
            for raw in path.read_text(errors="replace").splitlines():
                try:
                    parsed = json.loads(raw)
                except ValueError:
                    parsed = None
                out.append(parsed if isinstance(parsed, dict) else {"raw": raw})
        return out

    def logged(self, event: str) -> bool:
        """Whether the current start logged a line whose ``event`` contains ``event``."""
        return any(event in str(line.get("event", "")) for line in self.lines())

    def tail(self, count: int = 40) -> str:
        texts: list[str] = []
        for path in sorted(self.log_dir.glob(f"{self.name}.*.log")):
            lines = path.read_text(errors="replace").splitlines()
            texts.append(f"----- {path.name} (last {min(count, len(lines))} of {len(lines)} lines)")
            texts.extend(lines[-count:])
        return "\n".join(texts)

    def check_running(self) -> None:
        """AssertionError with the log tail when the process has ended."""
        if self.process is not None and self.process.returncode is not None:
            raise AssertionError(f"{self.name} exited with {self.process.returncode}\n{self.tail()}")

    async def kill(self) -> None:
        """SIGKILL: no chance to clean up, as a crash."""
        if self.alive:
            assert self.process is not None
            self.process.kill()
            await self.process.wait()
        self._close_log()

    async def stop(self, grace: float = 30) -> int | None:
        """SIGTERM and wait (SIGKILL after ``grace`` seconds); the exit code."""
        if self.process is None:
            return None
        if self.alive:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), grace)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        self._close_log()
        return self.process.returncode

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


@dataclass
class Servers:
    kafka_bootstrap: str
    database_url: str
    kubeconfig: str
    aws_endpoint: str
    aws_region: str = "us-east-1"


@dataclass
class SystemSettings:
    """The knobs of one system: names derived from ``run`` and the timings the tests shorten."""

    run: str
    queue_url: str
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    api_port: int = field(default_factory=free_port)
    validation_delay: float = 2.0
    lease_duration: float = 4.0
    lease_renew: float = 1.0
    eviction_deadline: float = 300.0

    @property
    def prefix(self) -> str:
        return f"sys{self.run}."

    @property
    def cluster(self) -> str:
        return f"sys-{self.run}"

    @property
    def lease(self) -> str:
        return f"ebb-planner-sys-{self.run}"

    @property
    def executor_group(self) -> str:
        return f"sys-{self.run}-executor"

    @property
    def planner_group(self) -> str:
        return f"sys-{self.run}-planner"

    @property
    def ingester_group(self) -> str:
        return f"sys-{self.run}-ingester"

    @property
    def api_group(self) -> str:
        return f"sys-{self.run}-api"


#: service name → python module
SERVICES = {
    "cluster-watcher": "ebb_cluster_watcher",
    "consolidation-planner": "ebb_consolidation_planner",
    "termination-executor": "ebb_termination_executor",
    "interruption-ingester": "ebb_interruption_ingester",
    "decisions-api": "ebb_decisions_api",
}

#: what each service logs once it runs (the decisions-api is checked on /readyz instead)
STARTED = {
    "cluster-watcher": "cluster-watcher starting",
    "consolidation-planner": "consolidation-planner starting",
    "termination-executor": "termination-executor starting",
    "interruption-ingester": "interruption-ingester starting",
}


def service_env(name: str, servers: Servers, s: SystemSettings) -> dict[str, str]:
    """The EBB_<SERVICE>_* settings of ``name`` in the system ``s``."""
    common = {"KAFKA_BOOTSTRAP": servers.kafka_bootstrap, "TOPIC_PREFIX": s.prefix, "LOG_LEVEL": "info"}
    kube = {"KUBECONFIG": servers.kubeconfig}
    db = {"DATABASE_URL": servers.database_url, "CLUSTER": s.cluster}
    per: dict[str, dict[str, str]] = {
        "cluster-watcher": {**common, **kube, "MISSING_KIND_RETRY_SECONDS": "1", "WATCH_TIMEOUT_SECONDS": "60"},
        "consolidation-planner": {
            **common, **kube, **db, "GROUP": s.planner_group, "LEASE_NAME": s.lease, "LEASE_NAMESPACE": "default",
            "LEASE_DURATION_SECONDS": str(s.lease_duration), "LEASE_RENEW_SECONDS": str(s.lease_renew),
            "DEBOUNCE_SECONDS": "0.5", "PASS_INTERVAL_SECONDS": "2",
            "VALIDATION_DELAY_SECONDS": str(s.validation_delay), "METRICS_PORT": "0"},
        "termination-executor": {
            **common, **kube, **db, "GROUP": s.executor_group, "EVICTION_DEADLINE_SECONDS": str(s.eviction_deadline),
            "EVICTION_BACKOFF_INITIAL_SECONDS": "0.2", "EVICTION_BACKOFF_MAX_SECONDS": "1",
            "POLL_INTERVAL_SECONDS": "0.2"},
        "interruption-ingester": {
            **common, "QUEUE_URL": s.queue_url, "ENDPOINT_URL": servers.aws_endpoint, "REGION": servers.aws_region,
            "WAIT_TIME_SECONDS": "1", "BACKOFF_INITIAL_SECONDS": "0.2", "BACKOFF_MAX_SECONDS": "2",
            "METRICS_PORT": "0", "CONSUMER_GROUP": s.ingester_group},
        "decisions-api": {
            **common, **db, "TOKEN": s.token, "HOST": "127.0.0.1", "PORT": str(s.api_port), "GROUP": s.api_group,
            "SSE_KEEPALIVE_SECONDS": "2"},
    }
    prefix = "EBB_" + name.upper().replace("-", "_") + "_"
    env = {prefix + key: value for key, value in per[name].items()}
    if name == "interruption-ingester":
        env |= {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": servers.aws_region}
    return env


class System:
    """The five services of one system test, as processes. ``async with System(...) as system:`` starts
    them; on the way out (and on failure, with each service's log tail printed first) they are stopped."""

    def __init__(self, servers: Servers, settings: SystemSettings, log_dir: Path,
                 only: Iterable[str] = tuple(SERVICES)) -> None:
        self.servers = servers
        self.settings = settings
        self.log_dir = log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        self.services = {name: ServiceProcess(name, SERVICES[name], service_env(name, servers, settings), log_dir)
                         for name in only}

    def __getitem__(self, name: str) -> ServiceProcess:
        return self.services[name]

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.settings.api_port}"

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.settings.token}"}

    async def start(self, *names: str, **overrides: str) -> None:
        """Start ``names`` (all when none) and wait until each one runs."""
        chosen = [self.services[n] for n in (names or self.services)]
        for service in chosen:
            await service.start(**overrides)
        for service in chosen:
            await self.wait_started(service.name)

    async def wait_started(self, name: str, within: float = 90) -> None:
        service = self.services[name]

        async def up() -> bool:
            service.check_running()
            if name == "decisions-api":  # ready: the database answers, the cluster state and events flow
                return await _http_ok(f"{self.api}/readyz")
            return service.logged(STARTED[name])

        await eventually(f"{name} running", up, within=within, on_timeout=service.tail)

    def check_running(self) -> None:
        """AssertionError naming the service when any process has ended unexpectedly."""
        for service in self.services.values():
            service.check_running()

    def tails(self, count: int = 60) -> str:
        return "\n".join(f"===== {name} =====\n{service.tail(count)}" for name, service in self.services.items())

    async def stop(self) -> dict[str, int | None]:
        results = await asyncio.gather(*(s.stop() for s in self.services.values()))
        return dict(zip(self.services, results, strict=True))

    async def __aenter__(self) -> Self:
        try:
            await self.start()
        except BaseException:
            print(self.tails(), file=sys.stderr)
            await self.stop()
            raise
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        tb: TracebackType | None) -> None:
        codes = await self.stop()
        if error is not None:
            # pytest shows captured output of failed tests: every service's last lines
            print(f"\nservice exit codes: {codes}\nlogs in {self.log_dir}\n{self.tails()}", file=sys.stderr)
            return
        # every service stops gracefully on SIGTERM
        failed = {name: code for name, code in codes.items() if code != 0}
        if failed:
            print(self.tails(), file=sys.stderr)
            raise AssertionError(f"services that did not exit 0 on SIGTERM: {failed}; logs in {self.log_dir}")


async def _http_ok(url: str) -> bool:
    import httpx

    try:
        async with httpx.AsyncClient(timeout=3) as http:
            return (await http.get(url)).status_code == 200
    except httpx.HTTPError:
        return False


# ------------------------------------------------------------------------------------------- Kafka


@dataclass(frozen=True)
class Record:
    """A record as read from the broker (logical topic name)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key == name:
                return value.decode()
        return None

    def json(self) -> Any:
        assert self.value is not None
        return json.loads(self.value)


class TopicReader:
    """A plain aiokafka consumer (no group) reading ``topics`` of a prefix from their beginning into
    ``records``, in a background task. The topics are created first when missing."""

    def __init__(self, bootstrap: str, prefix: str, topics: Iterable[str]) -> None:
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.topics = list(topics)
        self.records: list[Record] = []
        self._task: asyncio.Task[None] | None = None
        self._consumer: AIOKafkaConsumer | None = None

    async def __aenter__(self) -> Self:
        async with KafkaBus(self.bootstrap, prefix=self.prefix) as bus:
            await bus.ensure_topics([t for t in self.topics if not t.endswith(".dlq")])
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        await consumer.start()
        self._consumer = consumer
        partitions: list[TopicPartition] = []
        for topic in self.topics:
            physical = self.prefix + topic

            async def known(p: str = physical) -> list[int] | None:
                return await _partitions(consumer, p)

            numbers: list[int] = await eventually(f"partitions of {physical}", known, within=30)
            partitions += [TopicPartition(physical, n) for n in numbers]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        self._task = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self._consumer is not None
        while True:
            batch = await self._consumer.getmany(timeout_ms=200)
            for records in batch.values():
                for r in records:
                    self.records.append(Record(
                        topic=r.topic.removeprefix(self.prefix), partition=r.partition, offset=r.offset, key=r.key,
                        value=r.value, headers=tuple((k, v or b"") for k, v in r.headers)))

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._consumer is not None:
            await self._consumer.stop()

    def on(self, topic: str) -> list[Record]:
        if self._task is not None and self._task.done():
            self._task.result()  # raise what stopped the reader
        return [r for r in self.records if r.topic == topic]

    def events(self) -> list[DisruptionEvent]:
        """The ebb.disruption.events records that decode with the contracts' codec (a test's own malformed
        records are left out)."""
        out = []
        for r in self.on("ebb.disruption.events"):
            if not self.decodes(r):
                continue
            message = from_kafka("ebb.disruption.events", r.key, r.value, list(r.headers))
            assert isinstance(message, DisruptionEvent)
            out.append(message)
        return out

    def dead_letters(self, topic: str) -> list[DeadLetter]:
        """The DeadLetters on ``<topic>.dlq``."""
        out = []
        for r in self.on(f"{topic}.dlq"):
            message = from_kafka(f"{topic}.dlq", r.key, r.value, list(r.headers))
            assert isinstance(message, DeadLetter)
            out.append(message)
        return out

    def decodes(self, record: Record) -> bool:
        try:
            decode(record.topic, record.key, record.value, list(record.headers))
        except ContractError:
            return False
        return True


async def _partitions(consumer: AIOKafkaConsumer, physical: str) -> list[int] | None:
    await consumer._client.force_metadata_update()  # a topic created a moment ago
    numbers = consumer.partitions_for_topic(physical)
    return sorted(numbers) if numbers else None


async def send_raw(bootstrap: str, physical_topic: str, records: Iterable[tuple[bytes | None, bytes | None,
                                                                                 list[tuple[str, bytes]]]]) -> None:
    """Produce raw records (key, value, headers) as they are: for malformed input."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for key, value, headers in records:
            await producer.send_and_wait(physical_topic, value=value, key=key, headers=headers)
    finally:
        await producer.stop()


# ------------------------------------------------------------------------------------------- PostgreSQL


async def create_database(server_url: str, name: str, *, migrate: bool = True) -> str:
    """Create the database ``name`` (owned by the URL's user) on the server of ``server_url`` (a SQLAlchemy
    URL), migrate it with the store's Alembic migrations (unless not ``migrate``) and return its URL. The URL's
    user may lack CREATEDB (the local servers' ``ebb`` role): then the ``postgres`` superuser (trust
    authentication on the local servers) creates it. Where neither can, the server's own database is migrated
    and used (the tests keep their rows apart by cluster name, as the other integration tests do)."""
    url = make_url(server_url)
    owner = url.username or "postgres"
    created = False
    for user in dict.fromkeys([owner, "postgres"]):
        try:
            connection = await asyncpg.connect(**{**_asyncpg_args(server_url), "user": user})
        except (OSError, asyncpg.PostgresError):
            continue
        try:
            await connection.execute(f'CREATE DATABASE "{name}" OWNER "{owner}"')
            created = True
            break
        except asyncpg.InsufficientPrivilegeError:
            continue
        finally:
            await connection.close()
    database_url = url.set(database=name).render_as_string(hide_password=False) if created else server_url
    if migrate:
        await upgrade_async(database_url)
    return database_url


async def drop_database(server_url: str, name: str) -> None:
    url = make_url(server_url)
    for user in dict.fromkeys([url.username or "postgres", "postgres"]):
        try:
            connection = await asyncpg.connect(**{**_asyncpg_args(server_url), "user": user})
        except (OSError, asyncpg.PostgresError):
            continue
        try:
            await connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            return
        except asyncpg.InsufficientPrivilegeError:
            continue
        finally:
            await connection.close()


def _asyncpg_args(sqlalchemy_url: str) -> dict[str, Any]:
    url = make_url(sqlalchemy_url)
    return {"host": url.host, "port": url.port, "user": url.username, "password": url.password,
            "database": url.database}


async def query(database_url: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    """Rows of ``sql`` on the database (plain asyncpg: the test reads what the services wrote)."""
    connection = await asyncpg.connect(**_asyncpg_args(database_url))
    try:
        return list(await connection.fetch(sql, *args))
    finally:
        await connection.close()


# ------------------------------------------------------------------------------------------- Kubernetes


def crd(kind: str, plural: str) -> dict[str, Any]:
    """A minimal karpenter.sh/v1 CRD (any fields kept), cluster-scoped."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{KARPENTER}"},
        "spec": {"group": KARPENTER, "scope": "Cluster",
                 "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object",
                                                              "x-kubernetes-preserve-unknown-fields": True}},
                               "subresources": {"status": {}}}]},
    }


async def install_karpenter_crds(kube_api: Any) -> list[str]:
    """The NodePool and NodeClaim CRDs (an existing definition is kept; one being deleted is waited for and
    made again); waits until both are served. Returns the names of the CRDs this call created."""
    extensions = client.ApiextensionsV1Api(kube_api)
    custom = client.CustomObjectsApi(kube_api)
    created: list[str] = []
    for kind, plural in (("NodePool", "nodepools"), ("NodeClaim", "nodeclaims")):
        name = f"{plural}.{KARPENTER}"

        async def present(k: str = kind, p: str = plural, n: str = name) -> bool:
            try:
                definition: Any = crd(k, p)
                await extensions.create_custom_resource_definition(definition)
                created.append(n)
                return True
            except ApiException as e:
                if e.status != 409:
                    raise
            try:
                existing = await extensions.read_custom_resource_definition(n)
            except ApiException as e:
                if e.status != 404:
                    raise
                return False  # its deletion ended between the create and the read: make it again
            return existing.metadata.deletion_timestamp is None  # else: wait until it is gone, make it again

        await eventually(f"the {name} CRD", present, within=120, interval=0.5)

        async def served(p: str = plural) -> bool:
            try:
                await custom.list_cluster_custom_object(KARPENTER, "v1", p, limit=1)
            except ApiException as e:
                if e.status == 404:
                    return False
                raise
            return True

        await eventually(f"{name} served", served, within=60)
    return created


async def remove_crds(kube_api: Any, names: Iterable[str]) -> None:
    extensions = client.ApiextensionsV1Api(kube_api)
    for name in names:
        with contextlib.suppress(ApiException):
            await extensions.delete_custom_resource_definition(name)


def nodepool(name: str, run: str, *, budget: str = "100%", consolidate_after: str = "0s") -> dict[str, Any]:
    """A karpenter.sh/v1 NodePool whose nodes are this run's KWOK nodes."""
    return {
        "apiVersion": f"{KARPENTER}/v1", "kind": "NodePool", "metadata": {"name": name, "labels": {RUN_LABEL: run}},
        "spec": {
            "template": {"metadata": {"labels": {RUN_LABEL: run}},
                         "spec": {"requirements": [
                             {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                             {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]},
                             {"key": "node.kubernetes.io/instance-type", "operator": "In",
                              "values": ["m5.xlarge"]}],
                                  "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                   "name": "default"}}},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": consolidate_after,
                           "budgets": [{"nodes": budget}]},
        },
    }


Model = TypeVar("Model")


def as_body(model: type[Model], doc: Mapping[str, Any]) -> Model:
    """``doc`` as the body of a kubernetes-asyncio create call that names ``model``: the client sends a plain
    dict as it is (ApiClient.sanitize_for_serialization), but its signatures accept only the model class."""
    return cast(Model, doc)


async def create_nodepool(kube_api: Any, body: dict[str, Any]) -> None:
    await client.CustomObjectsApi(kube_api).create_cluster_custom_object(KARPENTER, "v1", "nodepools", body)


async def delete_nodepool(kube_api: Any, name: str) -> None:
    with contextlib.suppress(ApiException):
        await client.CustomObjectsApi(kube_api).delete_cluster_custom_object(KARPENTER, "v1", "nodepools", name)


def instance_id(node: str) -> str:
    """A stable fake EC2 instance id for a node name."""
    return "i-" + uuid.uuid5(uuid.NAMESPACE_DNS, node).hex[:17]


def kwok_node(name: str, pool: str, run: str, *, cpu: str = "4", memory: str = "16Gi",
              annotations: Mapping[str, str] | None = None) -> client.V1Node:
    """A KWOK node of ``pool`` as Karpenter would have made it: nodepool, initialized, an m5.xlarge of the
    bundled catalog in us-east-1a, on-demand, with an AWS provider id."""
    capacity = {"cpu": cpu, "memory": memory, "pods": "110"}
    return client.V1Node(
        metadata=client.V1ObjectMeta(
            name=name,
            annotations={KWOK: "fake", **(annotations or {})},
            labels={"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                    "type": "kwok", RUN_LABEL: run,
                    "karpenter.sh/nodepool": pool, "karpenter.sh/initialized": "true",
                    "karpenter.sh/registered": "true", "karpenter.sh/capacity-type": "on-demand",
                    "node.kubernetes.io/instance-type": "m5.xlarge", "topology.kubernetes.io/zone": "us-east-1a"},
        ),
        spec=client.V1NodeSpec(provider_id=f"aws:///us-east-1a/{instance_id(name)}",
                               taints=[client.V1Taint(key=KWOK, value="fake", effect="NoSchedule")]),
        status=client.V1NodeStatus(capacity=capacity, allocatable=capacity),
    )


def deployment(name: str, run: str, replicas: int, cpu: str) -> client.V1Deployment:
    """A Deployment of pause pods for this run's KWOK nodes (placed there by kube-scheduler)."""
    labels = {"app": name}
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1DeploymentSpec(
            replicas=replicas,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(
                    containers=[client.V1Container(
                        name="app", image="registry.k8s.io/pause:3.10",
                        resources=client.V1ResourceRequirements(requests={"cpu": cpu, "memory": "256Mi"}))],
                    node_selector={RUN_LABEL: run},
                    tolerations=[client.V1Toleration(key=KWOK, operator="Exists", effect="NoSchedule")],
                    automount_service_account_token=False,
                    termination_grace_period_seconds=0,
                ),
            ),
        ),
    )


def daemonset(name: str, run: str) -> client.V1DaemonSet:
    """A DaemonSet of pause pods on this run's KWOK nodes."""
    labels = {"app": name}
    return client.V1DaemonSet(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1DaemonSetSpec(
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(
                    containers=[client.V1Container(
                        name="agent", image="registry.k8s.io/pause:3.10",
                        resources=client.V1ResourceRequirements(requests={"cpu": "10m", "memory": "16Mi"}))],
                    node_selector={RUN_LABEL: run},
                    tolerations=[client.V1Toleration(key=KWOK, operator="Exists", effect="NoSchedule")],
                    automount_service_account_token=False,
                    termination_grace_period_seconds=0,
                ),
            ),
        ),
    )


async def pods_of(kube_api: Any, namespace: str, app: str) -> list[client.V1Pod]:
    core = client.CoreV1Api(kube_api)
    return list((await core.list_namespaced_pod(namespace, label_selector=f"app={app}")).items)


def running(pods: Iterable[client.V1Pod]) -> list[client.V1Pod]:
    return [p for p in pods if p.status.phase == "Running" and p.metadata.deletion_timestamp is None
            and p.spec.node_name]


class PodTracker:
    """Every pod UID of a namespace seen while it runs (polled), with the node it was bound to: a pod
    evicted and recreated by its controller shows up as a new UID."""

    def __init__(self, kube_api: Any, namespace: str) -> None:
        self.core = client.CoreV1Api(kube_api)
        self.namespace = namespace
        self.seen: dict[str, tuple[str, str | None]] = {}
        self._task: asyncio.Task[None] | None = None
        #: completed polls (a caller waits for one more before reading ``seen``)
        self.polls = 0

    async def _poll(self) -> None:
        while True:
            # an error of one poll (a refusal, a connection an apiserver restart broke) is not the end of polling
            # with a timeout: a request on a connection the apiserver's restart left half-open would hang for good
            with contextlib.suppress(ApiException, OSError, TimeoutError, aiohttp.ClientError):
                for pod in (await self.core.list_namespaced_pod(self.namespace, _request_timeout=5)).items:
                    name, node = pod.metadata.name, pod.spec.node_name
                    if node or pod.metadata.uid not in self.seen:
                        self.seen[pod.metadata.uid] = (name, node)
                self.polls += 1
            await asyncio.sleep(0.2)

    async def caught_up(self, within: float = 30) -> None:
        """Return after a poll that started from now has completed (``seen`` holds what exists now)."""
        wanted = self.polls + 2
        deadline = asyncio.get_running_loop().time() + within
        while self.polls < wanted:
            if self._task is not None and self._task.done():
                raise AssertionError(f"the pod tracker stopped: {self._task!r}")
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"the pod tracker made no poll in {within:.0f} s")
            await asyncio.sleep(0.05)

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self._poll())
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


async def create_namespace(kube_api: Any, name: str, within: float = 60) -> None:
    """Create the namespace ``name`` and wait for its ``default`` ServiceAccount: the apiserver refuses a pod
    (403, "serviceaccount default not found") until kube-controller-manager has made it, which takes longer
    right after an apiserver restart (the chaos run's)."""
    core = client.CoreV1Api(kube_api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))

    async def service_account() -> bool:
        try:
            await core.read_namespaced_service_account("default", name)
        except ApiException as error:
            if error.status == 404:
                return False
            raise
        return True

    await eventually(f"the default ServiceAccount of {name}", service_account, within=within)


async def delete_nodes(kube_api: Any, names: Iterable[str]) -> None:
    core = client.CoreV1Api(kube_api)
    for name in names:
        try:
            await core.delete_node(name)
        except ApiException as e:
            if e.status != 404:
                raise


def has_taint(node: client.V1Node, key: str) -> bool:
    return any(t.key == key for t in (node.spec.taints or []))



# ------------------------------------------------------------------------------------------- one test's world


@dataclass
class Sandbox:
    """What one system test owns: names derived from ``run``, its database, queue and namespace."""

    run: str
    servers: Servers
    settings: SystemSettings
    namespace: str
    pool: str
    log_dir: Path
    nodes: list[str] = field(default_factory=list)

    def system(self, **changes: Any) -> System:
        for name, value in changes.items():
            setattr(self.settings, name, value)
        return System(self.servers, self.settings, self.log_dir)

    async def decisions(self) -> list[asyncpg.Record]:
        """The decisions rows of this test's cluster, oldest first."""
        return await query(self.servers.database_url,
                           "SELECT * FROM decisions WHERE cluster = $1 ORDER BY created_at, id", self.settings.cluster)

    async def timeline(self, decision_id: str) -> list[asyncpg.Record]:
        return await query(self.servers.database_url,
                           "SELECT * FROM decision_events WHERE decision_id = $1 ORDER BY at, id", decision_id)


@contextlib.asynccontextmanager
async def sandbox(kube_api: Any, kafka_bootstrap: str, postgres_url: str, kubeconfig: str, aws_endpoint: str,
                  aws_region: str, log_dir: Path) -> Any:
    """A fresh migrated database, an SQS queue on moto, a namespace and the Karpenter CRDs; on the way out
    the namespace, the run's nodes and NodePool, the Lease, the queue and the database are removed."""
    from aiobotocore.session import get_session

    run = uuid.uuid4().hex[:8]
    database = f"ebb_sys_{run}"
    core = client.CoreV1Api(kube_api)
    async with get_session().create_client("sqs", endpoint_url=aws_endpoint, region_name=aws_region,
                                           aws_access_key_id="testing", aws_secret_access_key="testing") as sqs:
        queue_url = (await sqs.create_queue(QueueName=f"ebb-sys-{run}"))["QueueUrl"]
        database_url = await create_database(postgres_url, database)
        crds = await install_karpenter_crds(kube_api)
        namespace = f"sys-{run}"
        await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
        servers = Servers(kafka_bootstrap=kafka_bootstrap, database_url=database_url, kubeconfig=kubeconfig,
                          aws_endpoint=aws_endpoint, aws_region=aws_region)
        box = Sandbox(run=run, servers=servers, settings=SystemSettings(run=run, queue_url=queue_url),
                      namespace=namespace, pool=f"sys-pool-{run}", log_dir=log_dir)
        try:
            yield box
        finally:
            await delete_nodepool(kube_api, box.pool)
            with contextlib.suppress(ApiException):
                await core.delete_namespace(namespace)
            await delete_nodes(kube_api, box.nodes)
            with contextlib.suppress(ApiException):
                await client.CoordinationV1Api(kube_api).delete_namespaced_lease(box.settings.lease, "default")
            with contextlib.suppress(Exception):
                await sqs.delete_queue(QueueUrl=queue_url)
            await drop_database(postgres_url, database)
            await remove_crds(kube_api, crds)  # only those this test made: the cluster is left as it was


# ------------------------------------------------------------------------------------------- server-sent events


@dataclass(frozen=True)
class SseEvent:
    id: str | None
    event: str | None
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


class SseReader:
    """``GET <url>`` as a text/event-stream, read in a background task into ``events`` (comments and
    keep-alives skipped); ``status`` and ``content_type`` of the response once it arrived."""

    def __init__(self, url: str, headers: Mapping[str, str], params: Mapping[str, str] | None = None) -> None:
        self.url = url
        self.headers = dict(headers)
        self.params = dict(params or {})
        self.events: list[SseEvent] = []
        self.status: int | None = None
        self.content_type: str | None = None
        self.connected = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _read(self) -> None:
        import httpx

        async with httpx.AsyncClient(timeout=httpx.Timeout(10, read=None)) as http, http.stream(
            "GET", self.url, headers={**self.headers, "Accept": "text/event-stream"}, params=self.params
        ) as response:
            self.status = response.status_code
            self.content_type = response.headers.get("content-type")
            self.connected.set()
            fields: dict[str, list[str]] = {}
            async for line in response.aiter_lines():
                if line == "":
                    if "data" in fields:
                        ids, names = fields.get("id", []), fields.get("event", [])
                        self.events.append(SseEvent(id=ids[-1] if ids else None, event=names[-1] if names else None,
                                                    data="\n".join(fields["data"])))
                    fields = {}
                    continue
                if line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                fields.setdefault(name, []).append(value.removeprefix(" "))

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self._read())
        await eventually(f"connected to {self.url}", lambda: self.connected.is_set() or self._failed(), within=30)
        return self

    def _failed(self) -> bool:
        if self._task is not None and self._task.done():
            self._task.result()
            raise AssertionError(f"{self.url}: the stream ended at once")
        return False

    def check(self) -> None:
        """Raise what ended the stream, if it ended with an error."""
        if self._task is not None and self._task.done() and not self._task.cancelled():
            self._task.result()

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


def jv(value: Any) -> Any:
    """A JSON column's value (asyncpg hands json/jsonb over as text)."""
    return json.loads(value) if isinstance(value, str) else value


async def nodes_ready(kube_api: Any, names: Iterable[str]) -> bool:
    """Whether every node of ``names`` is Ready (KWOK makes them so) and schedulable by kube-scheduler."""
    core = client.CoreV1Api(kube_api)
    for name in names:
        node = await core.read_node(name)
        conditions = {c.type: c.status for c in (node.status.conditions or [])}
        if conditions.get("Ready") != "True" or node.spec.unschedulable:
            return False
        if any(t.key.startswith("node.kubernetes.io/") for t in (node.spec.taints or [])):
            return False  # not-ready / unreachable taints not yet removed by the node lifecycle controller
    return True


def malformed_records(ce_type: str, key: str) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]:
    """Three records that break the contract, keyed ``key``: not a CloudEvent (no ``ce_`` headers), a
    CloudEvent whose value is not JSON, and one whose JSON payload violates the schema of ``ce_type``."""

    def headers(event_id: str) -> list[tuple[str, bytes]]:
        return [("ce_specversion", b"1.0"), ("ce_id", event_id.encode()), ("ce_source", b"/ebb/system-test"),
                ("ce_type", ce_type.encode()), ("ce_subject", key.encode()), ("content-type", b"application/json")]

    wrong_schema = str(uuid.uuid4())
    return [
        (key.encode(), b"hello, I am not a CloudEvent", []),
        (key.encode(), b'{"id": "not even closed', headers(str(uuid.uuid4()))),
        (key.encode(), json.dumps({"id": wrong_schema, "unexpected": [1, 2, 3]}).encode(), headers(wrong_schema)),
    ]


async def node_gone(core: Any, name: str) -> bool:
    """The Node ``name`` is gone from the apiserver (a 404)."""
    try:
        await core.read_node(name)
    except ApiException as e:
        if e.status == 404:
            return True
        raise
    return False
