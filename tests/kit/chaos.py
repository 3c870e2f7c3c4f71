"""The chaos run (issue 13; docs/reliability.md "The chaos run"): ebb's six services as processes on a KWOK
cluster, a workload that scales up and down, a driver that SIGKILLs a random service every few seconds and
restarts it after a random delay, and restarts of PostgreSQL, Kafka and the kube-apiserver (stopped, left down,
started again on the same data) at chosen points. Karpenter's promises are checked all through the run and at
its end; every broken one is a violation, and a run passes only with none.

The invariants, and where each is read from:

- **no PDB violated by an ebb eviction**: ebb removes pods only through the Eviction API, where the API server
  checks each PodDisruptionBudget (201 allowed, 429 refused): the API server's audit log must show no ``DELETE``
  of a pod by any of ebb's components (no terminationGracePeriod is set, so nothing may bypass a PDB);
- **no budget ever exceeded**: sampled every second, the budget ledger's rows of live voluntary decisions and
  the Nodes tainted or deleting for a voluntary disruption (interruptions are not budgeted, as in Karpenter)
  are at most the NodePool's ``nodes`` budget;
- **no pod evicted twice**: per pod, at most one eviction of ebb's answered 201 (pod names are unique);
- **no node left tainted or cordoned without a live decision**: sampled, such a node may exist only briefly
  (a decision that just ended: ``ABANDONED_AFTER``), and at the end not at all;
- **every decision reaches a terminal state** once the chaos stops (within ``settle_seconds``); a decision proposed
  after the cluster was seen settled is the calm cluster's own (the planners go on planning), reported and not
  counted;
- **no interruption lost**: every spot interruption sent to SQS has its decision (``int-…``, or the decision
  that was already disrupting the node), and its node is gone at the end;
- **no duplicate replacement**: the Nodes ebb creates for a decision (audit log, ``ebb.sh/decision-id``) are
  at most the decision's replacements.

- **not ready while a server it needs is down, ready again without an operator**: halfway through each server's
  restart, every running service that needs that server must answer ``/readyz`` 503 naming it (the
  decisions-api: PostgreSQL only); once the chaos is over every service must answer 200 (within
  ``READY_WITHIN`` seconds).
Besides, a service that exits without having been killed is counted as a crash (a lost server must make it
wait and report not ready, not exit) and restarted, as Kubernetes would. ``run_chaos`` returns a
`ChaosReport`; the short version is tests/integration/test_chaos.py, the long one ``python -m bench chaos``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from ebb.adapters.store.migrate import upgrade_async
from tests.kit.kube_audit import ANNOTATION_DECISION_ID, AuditEvent, AuditLog
from tests.kit.restartable import PrivateKafka, PrivatePostgres, restart_apiserver
from tests.kit.system import (
    RUN_LABEL,
    SERVICES,
    Servers,
    ServiceProcess,
    SystemSettings,
    as_body,
    create_nodepool,
    delete_nodepool,
    deployment,
    free_port,
    install_karpenter_crds,
    jv,
    kwok_node,
    nodepool,
    query,
    remove_crds,
    service_env,
)

#: the taint ebb puts on a node it disrupts outside the karpenter mode, and Kubernetes' cordon
DISRUPTED = "karpenter.sh/disrupted"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
#: a node tainted or cordoned with no live decision for longer than this was abandoned
ABANDONED_AFTER = 60.0
LIVE = ("proposed", "approved", "executing")
TERMINAL = ("succeeded", "failed", "rejected", "cancelled", "superseded")
#: how long after the chaos every service must answer /readyz 200
READY_WITHIN = 120.0
#: the servers each service's /readyz names (ebb.adapters.health; the decisions-api checks only its database)
NEEDS = {"cluster-watcher": {"kafka", "apiserver"}, "consolidation-planner": {"kafka", "postgresql", "apiserver"},
         "termination-executor": {"kafka", "postgresql", "apiserver"}, "interruption-ingester": {"kafka"},
         "decisions-api": {"postgresql"}}
#: the processes of a chaos run: two planners share the Lease
PROCESSES = {"cluster-watcher": "cluster-watcher", "planner-a": "consolidation-planner",
             "planner-b": "consolidation-planner", "termination-executor": "termination-executor",
             "interruption-ingester": "interruption-ingester", "decisions-api": "decisions-api"}


@dataclass(frozen=True)
class ChaosPlan:
    """What a chaos run does: for ``minutes``, a kill every ``kill_every`` seconds (uniform), each service
    restarted ``restart_after`` seconds later, the servers restarted at the given fractions of the run."""

    minutes: float
    nodes: int = 30
    seed: int = 1
    kill_every: tuple[float, float] = (4.0, 10.0)
    restart_after: tuple[float, float] = (1.0, 6.0)
    server_restarts: tuple[tuple[float, str], ...] = ((0.3, "postgresql"), (0.55, "kafka"), (0.8, "apiserver"))
    server_down_seconds: float = 8.0
    interruptions: int = 3
    budget: int = 3
    settle_seconds: float = 300.0


@dataclass
class ChaosReport:
    plan: ChaosPlan
    started: str = ""
    chaos_seconds: float = 0.0
    settle_seconds: float = 0.0
    kills: Counter[str] = field(default_factory=Counter)
    crashes: list[str] = field(default_factory=list)
    server_restarts: list[str] = field(default_factory=list)
    scalings: int = 0
    nodes_added: int = 0
    decisions: Counter[str] = field(default_factory=Counter)
    methods: Counter[str] = field(default_factory=Counter)
    evictions: Counter[int] = field(default_factory=Counter)
    interruptions_sent: int = 0
    samples: int = 0
    samples_without_database: int = 0
    max_voluntary_disrupting: int = 0
    max_ledger: int = 0
    #: server → the services that answered /readyz 503 naming it halfway through its restart
    not_ready_during: dict[str, list[str]] = field(default_factory=dict)
    #: seconds after the chaos until every service answered /readyz 200
    ready_after_seconds: float = 0.0
    #: decisions the planners proposed once the cluster had settled (not the chaos's: the calm cluster's own)
    after_settling: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    #: what explains a violation: each PodDisruptionBudget's changes of status through the run (seconds from the
    #: chaos's start) and, at the end, the pods it counted unhealthy, printed under the violations
    diagnosis: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        # (dataclasses.asdict rebuilds a Counter from (key, value) pairs, which counts the pairs as keys)
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["plan"] = asdict(self.plan)
        for name in ("kills", "decisions", "methods", "evictions"):
            out[name] = {str(k): v for k, v in getattr(self, name).items()}
        out["markdown"] = self.markdown()
        return out

    def markdown(self) -> str:
        p = self.plan
        completed = sum(v for k, v in self.decisions.items() if k in TERMINAL)
        lines = [
            f"Chaos run of {self.started}: {self.chaos_seconds / 60:.1f} minutes of chaos on {p.nodes} KWOK nodes "
            f"(seed {p.seed}), then {self.settle_seconds:.0f} s to settle.", "",
            "| figure | value |", "|---|---:|",
            f"| services SIGKILLed | {sum(self.kills.values())} ({_counts(self.kills)}) |",
            f"| server restarts | {len(self.server_restarts)} ({'; '.join(self.server_restarts)}) |",
            f"| services that exited on their own (crashes) | {len(self.crashes)} |",
            f"| workload scalings / nodes added for pending pods | {self.scalings} / {self.nodes_added} |",
            f"| decisions completed | {completed} ({_counts(self.decisions)}) |",
            f"| by method | {_counts(self.methods)} |",
            f"| ebb's evictions by answer | {_counts(self.evictions)} |",
            f"| spot interruptions sent | {self.interruptions_sent} |",
            f"| invariant samples (without the database) | {self.samples} ({self.samples_without_database}) |",
            f"| most voluntary disruptions at once (tainted or deleting nodes; ledger) / budget | "
            f"{self.max_voluntary_disrupting}; {self.max_ledger} / {p.budget} |",
            f"| not ready (/readyz 503 naming the server) halfway through its restart | "
            f"{'; '.join(f'{k}: {len(v)} ({_names(v)})' for k, v in self.not_ready_during.items()) or '-'} |",
            f"| every service ready (/readyz 200) after the settling | {self.ready_after_seconds:.0f} s |",
            f"| decisions proposed after the settling, still going at the end | {len(self.after_settling)} |",
            f"| **violations** | **{len(self.violations)}** |",
        ]
        lines += [f"- {v}" for v in self.violations]
        if self.violations and self.diagnosis:
            lines += ["", "What the PodDisruptionBudgets said (seconds from the chaos's start):"]
            lines += [f"- {d}" for d in self.diagnosis]
        return "\n".join(lines) + "\n"


def _names(names: list[str]) -> str:
    return ", ".join(names)


def _counts(counter: Mapping[Any, int]) -> str:
    return ", ".join(f"{key}: {value}" for key, value in sorted(counter.items()))


def _pdb(name: str, app: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": app}}, **spec}}


#: the workload: (name, replicas at the start, cpu per pod, PDB spec or None, the pods may not be disrupted)
WORKLOAD: tuple[tuple[str, int, str, dict[str, Any] | None, bool], ...] = (
    ("web", 24, "500m", {"maxUnavailable": 2}, False),
    ("api", 16, "1", {"minAvailable": "75%"}, False),
    ("batch", 20, "250m", None, False),
    ("guarded", 3, "500m", None, True),
)


class Chaos:
    """One chaos run; ``run()`` gives its report. The servers it restarts are its own (PostgreSQL and Kafka)
    or the session's apiserver (``audit_log`` names it: without one, the apiserver is not restarted and
    the audit-log invariants are not checked)."""

    def __init__(self, plan: ChaosPlan, kube_api: Any, kubeconfig: str, aws_endpoint: str, audit_log: Path | None,
                 work_dir: Path, progress: Callable[[str], None] = print) -> None:
        self.plan = plan
        self.api = kube_api
        self.core = client.CoreV1Api(kube_api)
        self.apps = client.AppsV1Api(kube_api)
        self.kubeconfig = kubeconfig
        self.aws_endpoint = aws_endpoint
        self.audit = AuditLog(audit_log) if audit_log is not None else None
        self.work_dir = work_dir
        self.say = progress
        self.random = random.Random(plan.seed)
        self.run_id = uuid.uuid4().hex[:8]
        self.namespace = f"chaos-{self.run_id}"
        self.pool = f"chaos-pool-{self.run_id}"
        self.report = ChaosReport(plan)
        self.processes: dict[str, ServiceProcess] = {}
        self.killed: set[str] = set()
        self.interrupted: dict[str, str] = {}  # node -> instance id
        #: the decision ids when the cluster was last seen settled (`_settled`); None when it was not
        self.settled_ids: set[str] | None = None
        self.nodes_made: list[str] = []
        self.suspect: dict[str, float] = {}  # node tainted or cordoned without a live decision -> since
        self.postgres: PrivatePostgres | None = None
        self.kafka: PrivateKafka | None = None
        self.database_url = ""
        self.queue_url = ""
        self.stopping = False
        self._later: set[asyncio.Task[None]] = set()  # the pending restarts
        self.crds: list[str] = []  # the Karpenter CRDs this run installed
        self.readyz: dict[str, str] = {}  # process -> its /readyz URL
        self.policy = client.PolicyV1Api(kube_api)
        self.started_at = 0.0  # the loop's time when the chaos started
        self.pdb_status: dict[str, str] = {}  # PDB -> its status as last sampled

    # ------------------------------------------------------------------------------------------------ setup

    async def _servers(self) -> Servers:
        self.postgres = PrivatePostgres(self.work_dir / "postgres")
        self.kafka = PrivateKafka(self.work_dir / "kafka")
        await asyncio.gather(asyncio.to_thread(self.postgres.start), asyncio.to_thread(self.kafka.start))
        self.database_url = self.postgres.url
        await upgrade_async(self.database_url)
        return Servers(kafka_bootstrap=self.kafka.bootstrap, database_url=self.database_url,
                       kubeconfig=self.kubeconfig, aws_endpoint=self.aws_endpoint)

    async def _cluster(self) -> None:
        self.crds = await install_karpenter_crds(self.api)
        await self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=self.namespace)))
        pool = nodepool(self.pool, self.run_id, budget=str(self.plan.budget), consolidate_after="10s")
        pool["spec"]["template"]["spec"]["expireAfter"] = f"{max(2, round(self.plan.minutes / 2))}m"
        await create_nodepool(self.api, pool)
        for _ in range(self.plan.nodes):
            await self._add_node()
        for name, replicas, cpu, pdb, protected in WORKLOAD:
            body = deployment(name, self.run_id, replicas, cpu)
            if protected:
                body.spec.template.metadata.annotations = {DO_NOT_DISRUPT: "true"}
            await self.apps.create_namespaced_deployment(self.namespace, body)
            if pdb is not None:
                await self.policy.create_namespaced_pod_disruption_budget(
                    self.namespace, as_body(client.V1PodDisruptionBudget, _pdb(name, name, **pdb)))

    async def _add_node(self) -> str:
        name = f"chaos-{self.run_id}-{len(self.nodes_made):03d}"
        self.nodes_made.append(name)
        await self.core.create_node(kwok_node(name, self.pool, self.run_id))
        return name

    def _services(self, servers: Servers) -> None:
        # the eviction deadline of a spot interruption's warning (2 minutes): a drain a PDB blocks (one whose pods a
        # restart left unready) ends within the settling, an interruption's with its node removed all the same
        settings = SystemSettings(run=self.run_id, queue_url=self.queue_url, lease_duration=6.0, lease_renew=2.0,
                                  validation_delay=3.0, api_port=free_port(), eviction_deadline=120.0)
        logs = self.work_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for name, service in PROCESSES.items():
            env = service_env(service, servers, settings)
            if service == "decisions-api":
                self.readyz[name] = f"http://127.0.0.1:{settings.api_port}/readyz"
            else:
                port, prefix = free_port(), "EBB_" + service.upper().replace("-", "_") + "_"
                env |= {prefix + "METRICS_PORT": str(port), prefix + "METRICS_ADDRESS": "127.0.0.1",
                        prefix + "PROBE_INTERVAL_SECONDS": "1"}
                self.readyz[name] = f"http://127.0.0.1:{port}/readyz"
            if service == "termination-executor":
                env["EBB_TERMINATION_EXECUTOR_PROVIDER"] = "kwok"
            if service == "decisions-api":
                env["EBB_DECISIONS_API_LOG_LEVEL"] = "warning"
            self.processes[name] = ServiceProcess(name, SERVICES[service], env, logs)

    # ------------------------------------------------------------------------------------------------ chaos

    async def _killer(self, until: float) -> None:
        loop = asyncio.get_running_loop()
        while loop.time() < until:
            await asyncio.sleep(self.random.uniform(*self.plan.kill_every))
            name = self.random.choice(sorted(self.processes))
            process = self.processes[name]
            if not process.alive or name in self.killed:
                continue
            self.killed.add(name)
            await process.kill()
            self.report.kills[name] += 1
            self._later.add(asyncio.create_task(self._restart(name, self.random.uniform(*self.plan.restart_after))))

    async def _restart(self, name: str, after: float = 0.0) -> None:
        await asyncio.sleep(after)
        if self.stopping:
            return
        process = self.processes[name]
        if not process.alive:
            await process.start()
        self.killed.discard(name)

    async def _watchdog(self) -> None:
        """A service that ended without being killed crashed: counted, and restarted (as Kubernetes would)."""
        while not self.stopping:
            for name, process in self.processes.items():
                if name in self.killed or process.process is None or process.alive:
                    continue
                assert process.process is not None
                code = process.process.returncode
                tail = [str(line.get("event", line.get("raw", "")))[:160] for line in process.lines()[-3:]]
                self.report.crashes.append(f"{name} exited with {code}: {' | '.join(tail)}")
                self.say(f"crash: {name} exited with {code}")
                await process.start()
            await asyncio.sleep(0.5)

    async def _server_restarts(self, started: float) -> None:
        loop = asyncio.get_running_loop()
        seconds = self.plan.minutes * 60
        for fraction, server in sorted(self.plan.server_restarts):
            await asyncio.sleep(max(0.0, started + fraction * seconds - loop.time()))
            began = loop.time()
            half = self.plan.server_down_seconds / 2
            if server == "postgresql" and self.postgres is not None:
                await asyncio.to_thread(self.postgres.stop)
                await asyncio.sleep(half)
                await self._not_ready_while_down(server)
                await asyncio.sleep(half)
                await asyncio.to_thread(self.postgres.start)
            elif server == "kafka" and self.kafka is not None:
                await asyncio.to_thread(self.kafka.stop)
                await asyncio.sleep(half)
                await self._not_ready_while_down(server)
                await asyncio.sleep(half)
                await asyncio.to_thread(self.kafka.start)
            elif server == "apiserver" and self.audit is not None:
                restart = asyncio.create_task(asyncio.to_thread(restart_apiserver, self.audit.path,
                                                                self.plan.server_down_seconds))
                await asyncio.sleep(half)  # it is stopped first, at once
                await self._not_ready_while_down(server)
                await restart
            else:
                continue
            self.report.server_restarts.append(f"{server} at {fraction:.0%}, back after {loop.time() - began:.0f} s")
            self.say(f"restarted {server}")

    async def _readyz(self, name: str) -> tuple[int, dict[str, Any]] | None:
        """The status and body of ``name``'s /readyz; None when it does not answer (killed, starting)."""
        try:
            async with httpx.AsyncClient(timeout=5) as http:
                response = await http.get(self.readyz[name])
            return response.status_code, response.json()
        except (httpx.HTTPError, ValueError):
            return None

    async def _not_ready_while_down(self, server: str) -> None:
        """Every running service that needs ``server`` (down now for a while) answers /readyz 503 naming it."""
        said: list[str] = []
        for name in sorted(self.processes):
            if server not in NEEDS[PROCESSES[name]] or not self.processes[name].alive:
                continue
            answer = await self._readyz(name)
            if answer is None:
                continue  # killed or restarting: nothing to ask
            status, body = answer
            check = (body.get("checks") or {}).get(server) if server != "postgresql" or name != "decisions-api" \
                else {"ready": "database" not in body}
            # 503 is not ready, as it must be; a just restarted service may not have registered that server's
            # probe yet (then another check says why): only a 200, or the server's own check ready, breaks it
            if status == 200 or (check and check.get("ready") is not False):
                self._violation(f"ready while {server} is down: {name} answered {status} {body}")
            else:
                said.append(name)
        self.report.not_ready_during[server] = said

    async def _all_ready(self) -> bool:
        answers = await asyncio.gather(*(self._readyz(name) for name in sorted(self.processes)))
        return all(a is not None and a[0] == 200 for a in answers)

    async def _workload(self, until: float) -> None:
        """Every 10-20 s one Deployment scaled to 30-150% of its first size."""
        loop = asyncio.get_running_loop()
        scalable = [(name, replicas) for name, replicas, _cpu, _pdb, protected in WORKLOAD if not protected]
        while loop.time() < until:
            await asyncio.sleep(self.random.uniform(10, 20))
            name, base = self.random.choice(scalable)
            with contextlib.suppress(ApiException, OSError, TimeoutError):
                await self.apps.patch_namespaced_deployment_scale(
                    name, self.namespace, {"spec": {"replicas": max(1, round(base * self.random.uniform(0.3, 1.5)))}})
                self.report.scalings += 1

    async def _provisioner(self) -> None:
        """Nodes added for pods pending longer than 5 s, as a provisioner would (ebb does not provision), until
        the run ends: the settling included, so a drain that waits for room gets it."""
        while not self.stopping:
            await asyncio.sleep(5)
            with contextlib.suppress(ApiException, OSError, TimeoutError):
                pods = (await self.core.list_namespaced_pod(self.namespace)).items
                now = datetime.now(UTC)
                pending = [p for p in pods if p.status.phase == "Pending" and not p.spec.node_name
                           and p.metadata.deletion_timestamp is None
                           and (now - p.metadata.creation_timestamp).total_seconds() > 5]
                cpu = sum(_cpu(p) for p in pending)
                for _ in range(min(4, math.ceil(cpu / 3.5))):
                    await self._add_node()
                    self.report.nodes_added += 1

    async def _interruptions(self, started: float) -> None:
        from aiobotocore.session import get_session

        loop = asyncio.get_running_loop()
        seconds = self.plan.minutes * 60
        async with get_session().create_client("sqs", endpoint_url=self.aws_endpoint, region_name="us-east-1",
                                               aws_access_key_id="testing", aws_secret_access_key="testing") as sqs:
            for i in range(self.plan.interruptions):
                await asyncio.sleep(max(0.0, started + (i + 0.5) / self.plan.interruptions * seconds - loop.time()))
                for _attempt in range(60):  # the apiserver may be restarting: until it is sent
                    if await self._interrupt(sqs):
                        break
                    await asyncio.sleep(2)

    async def _interrupt(self, sqs: Any) -> bool:
        """A spot interruption on SQS for a random node that nothing disrupts yet; False when none could be."""
        try:
            nodes = [n for n in (await self.core.list_node(label_selector=f"{RUN_LABEL}={self.run_id}")).items
                     if n.metadata.deletion_timestamp is None and n.metadata.name not in self.interrupted
                     and not _marked(n)]
        except (ApiException, OSError, TimeoutError):
            return False
        if not nodes:
            return False
        node = self.random.choice(sorted(nodes, key=lambda n: n.metadata.name))
        instance = (node.spec.provider_id or "").rsplit("/", 1)[-1]
        await sqs.send_message(QueueUrl=self.queue_url, MessageBody=json.dumps({
            "version": "0", "id": str(uuid.uuid4()), "detail-type": "EC2 Spot Instance Interruption Warning",
            "source": "aws.ec2", "account": "123456789012", "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": "us-east-1", "resources": [],
            "detail": {"instance-id": instance, "instance-action": "terminate"}}))
        self.interrupted[node.metadata.name] = instance
        self.report.interruptions_sent += 1
        return True

    # ------------------------------------------------------------------------------------------- invariants

    async def _decisions(self) -> list[Any]:
        return await query(self.database_url, "SELECT id, method, reason, state, nodes, replacements "
                                              "FROM decisions ORDER BY created_at, id")

    async def _ledger(self) -> int:
        [row] = await query(self.database_url, """
            SELECT count(*) AS n FROM budget_ledger l JOIN decisions d ON d.id = l.decision_id
             WHERE l.nodepool = $1 AND d.state IN ('approved', 'executing') AND d.id NOT LIKE 'int-%'""",
                            self.pool)
        return int(row["n"])

    async def _sample(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            nodes = (await self.core.list_node(label_selector=f"{RUN_LABEL}={self.run_id}")).items
        except (TimeoutError, ApiException, OSError):
            return  # the apiserver is restarting
        try:
            decisions = await asyncio.wait_for(self._decisions(), 5)
            ledger = await asyncio.wait_for(self._ledger(), 5)
        except Exception as e:
            if not _database_down(e):
                raise
            self.report.samples_without_database += 1
            return
        self.report.samples += 1
        live = {n["name"]: d for d in decisions if d["state"] in LIVE for n in jv(d["nodes"])}
        marked = {n.metadata.name for n in nodes if _marked(n) or n.metadata.deletion_timestamp is not None}
        # a node an interruption took is not a voluntary disruption, whether or not its decision is still live: the
        # nodes are listed before the decisions are read, so one whose interruption ended in between is still marked
        interrupted = {n["name"] for d in decisions if d["id"].startswith("int-") for n in jv(d["nodes"])}
        voluntary = {name for name in marked if name not in interrupted}
        self.report.max_voluntary_disrupting = max(self.report.max_voluntary_disrupting, len(voluntary))
        self.report.max_ledger = max(self.report.max_ledger, ledger)
        if len(voluntary) > self.plan.budget:
            self._violation(f"budget: {len(voluntary)} nodes tainted or deleting for voluntary disruption, budget "
                            f"{self.plan.budget}: {sorted(voluntary)}")
        if ledger > self.plan.budget:
            self._violation(f"budget: {ledger} ledger rows of live voluntary decisions, budget {self.plan.budget}")
        now = loop.time()
        for node in nodes:
            name = node.metadata.name
            if _marked(node) and node.metadata.deletion_timestamp is None and name not in live:
                since = self.suspect.setdefault(name, now)
                if now - since > ABANDONED_AFTER:
                    self._violation(f"abandoned: {name} tainted or cordoned with no live decision for "
                                    f"{now - since:.0f} s")
                    self.suspect[name] = now  # once a minute at most
            else:
                self.suspect.pop(name, None)

    def _violation(self, text: str) -> None:
        self.report.violations.append(text)
        self.say(f"VIOLATION {text}")

    async def _sampler(self) -> None:
        while not self.stopping:
            with contextlib.suppress(ApiException, OSError, asyncio.TimeoutError):
                await self._sample()
            with contextlib.suppress(ApiException, OSError, asyncio.TimeoutError):
                await self._sample_pdbs()
            await asyncio.sleep(1.0)

    async def _sample_pdbs(self) -> None:
        """Each PDB's status when it changes, for the diagnosis: a drain refused for minutes is explained by
        what the disruption controller counted (healthy, desired, expected) and when."""
        at = asyncio.get_running_loop().time() - self.started_at
        for pdb in (await self.policy.list_namespaced_pod_disruption_budget(self.namespace)).items:
            status = pdb.status
            said = (f"allows {status.disruptions_allowed}: healthy {status.current_healthy}, desired "
                    f"{status.desired_healthy}, expected {status.expected_pods}, disrupted "
                    f"{len(status.disrupted_pods or {})}, observed generation {status.observed_generation}")
            if self.pdb_status.get(pdb.metadata.name) != said:
                self.pdb_status[pdb.metadata.name] = said
                self.report.diagnosis.append(f"{at:.0f} s: PDB {pdb.metadata.name} {said}")

    async def _diagnose(self) -> None:
        """At the end of a run with violations: the pods each PDB counts unhealthy (not Ready, deleting, or
        pending), and where they are."""
        pods = (await self.core.list_namespaced_pod(self.namespace)).items
        nodes = {n.metadata.name for n in
                 (await self.core.list_node(label_selector=f"{RUN_LABEL}={self.run_id}")).items}
        for pdb in (await self.policy.list_namespaced_pod_disruption_budget(self.namespace)).items:
            app = (pdb.spec.selector.match_labels or {}).get("app")
            for pod in pods:
                if (pod.metadata.labels or {}).get("app") != app:
                    continue
                ready = any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))
                deleting = pod.metadata.deletion_timestamp
                if ready and deleting is None:
                    continue
                node = pod.spec.node_name
                where = f"on {node}" + ("" if node in nodes else " (no such node)") if node else "not bound"
                since = f", deleting since {deleting.isoformat()}" if deleting else ""
                self.report.diagnosis.append(
                    f"end: PDB {pdb.metadata.name} counts {pod.metadata.name} unhealthy: {pod.status.phase}, "
                    f"{'Ready' if ready else 'not Ready'}{since}, {where}")

    async def _settled(self) -> bool:
        try:
            decisions = await self._decisions()
            nodes = (await self.core.list_node(label_selector=f"{RUN_LABEL}={self.run_id}")).items
        except (TimeoutError, ApiException, OSError):
            return False
        gone = {n.metadata.name for n in nodes}
        settled = (not any(d["state"] in LIVE for d in decisions) and not any(_marked(n) for n in nodes)
                   and not (set(self.interrupted) & gone))
        # the decisions there were when the cluster was last seen settled: a later one is the calm cluster's own
        self.settled_ids = {d["id"] for d in decisions} if settled else None
        return settled

    async def _final_checks(self, audit_from: int) -> None:
        decisions = await self._decisions()
        for d in decisions:
            self.report.decisions[d["state"]] += 1
            self.report.methods[d["method"]] += 1
            if d["state"] not in TERMINAL:
                if self.settled_ids is not None and d["id"] not in self.settled_ids:
                    # proposed after the settling (the planners go on planning): not one the chaos left behind
                    self.report.after_settling.append(f"{d['id']} ({d['method']}, {d['state']})")
                    continue
                self._violation(f"not terminal: decision {d['id']} ({d['method']}) is {d['state']}")
        nodes = {n.metadata.name: n for n in
                 (await self.core.list_node(label_selector=f"{RUN_LABEL}={self.run_id}")).items}
        for name, node in nodes.items():
            if _marked(node):
                self._violation(f"abandoned: {name} still tainted or cordoned at the end")
        for name, instance in self.interrupted.items():
            # its own decision (int-...), or the one that was already disrupting the node when it came (the planner
            # notes the interruption and lets that one remove the node)
            mine = [d for d in decisions if name in {n["name"] for n in jv(d["nodes"])}]
            if not mine:
                self._violation(f"interruption lost: no decision for {name} ({instance})")
            if name in nodes:
                self._violation(f"interruption lost: {name} ({instance}) still exists")
        if self.audit is None:
            return
        events = [e for e in self.audit.events(audit_from) if e.by_ebb]
        evicted: Counter[str] = Counter()
        for e in events:
            if e.resource == "pods" and e.subresource == "eviction" and e.namespace == self.namespace:
                self.report.evictions[e.code] += 1
                if e.code == 201:
                    evicted[e.name] += 1
            if e.resource == "pods" and not e.subresource and e.verb == "delete" and e.namespace == self.namespace:
                self._violation(f"PDB bypassed: {e}")
        for pod, times in evicted.items():
            if times > 1:
                self._violation(f"evicted twice: pod {pod} evicted {times} times (201)")
        replacements = {d["id"]: len(jv(d["replacements"]) or []) for d in decisions}
        created: dict[str, set[str]] = {}
        for e in events:
            if e.resource == "nodes" and e.verb == "create" and e.ok:
                decision = _annotation(e, ANNOTATION_DECISION_ID)
                if decision:
                    created.setdefault(decision, set()).add(e.name)
        for decision, made in created.items():
            if len(made) > replacements.get(decision, 0):
                self._violation(f"duplicate replacement: decision {decision} launched {sorted(made)}, "
                                f"{replacements.get(decision, 0)} planned")

    # ------------------------------------------------------------------------------------------------ run

    async def run(self) -> ChaosReport:
        from aiobotocore.session import get_session

        self.report.started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        loop = asyncio.get_running_loop()
        audit_from = self.audit.mark() if self.audit is not None else 0
        async with get_session().create_client("sqs", endpoint_url=self.aws_endpoint, region_name="us-east-1",
                                               aws_access_key_id="testing", aws_secret_access_key="testing") as sqs:
            self.queue_url = (await sqs.create_queue(QueueName=f"ebb-chaos-{self.run_id}"))["QueueUrl"]
            try:
                servers = await self._servers()
                await self._cluster()
                self._services(servers)
                for process in self.processes.values():
                    await process.start()
                self.say(f"chaos {self.run_id}: {self.plan.nodes} nodes, {len(self.processes)} services; "
                         f"{self.plan.minutes:g} minutes")
                self.started_at = loop.time()
                tasks = [asyncio.create_task(self._watchdog()), asyncio.create_task(self._sampler()),
                         asyncio.create_task(self._provisioner())]
                started = loop.time()
                until = started + self.plan.minutes * 60
                chaos = [asyncio.create_task(self._killer(until)), asyncio.create_task(self._workload(until)),
                         asyncio.create_task(self._server_restarts(started)),
                         asyncio.create_task(self._interruptions(started))]
                await asyncio.gather(*chaos)
                self.report.chaos_seconds = loop.time() - started
                await asyncio.gather(*self._later)
                self.say("chaos over; settling")
                settle_from = loop.time()
                while loop.time() - settle_from < self.plan.settle_seconds:
                    if await self._settled():
                        await asyncio.sleep(10)
                        if await self._settled():
                            break
                    await asyncio.sleep(2)
                self.report.settle_seconds = loop.time() - settle_from
                ready_from = loop.time()
                for _ in range(int(READY_WITHIN)):
                    if await self._all_ready():
                        break
                    await asyncio.sleep(1)
                self.report.ready_after_seconds = loop.time() - ready_from
                for name in sorted(self.processes):
                    answer = await self._readyz(name)
                    if answer is None or answer[0] != 200:
                        self._violation(f"not ready {READY_WITHIN:.0f} s after the settling: {name} {answer}")
                self.stopping = True
                for task in tasks:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                await self._final_checks(audit_from)
                if self.report.violations:
                    with contextlib.suppress(ApiException, OSError, asyncio.TimeoutError):
                        await self._diagnose()
            finally:
                self.stopping = True
                await asyncio.gather(*(p.stop(grace=10) for p in self.processes.values()))
                await self._cleanup()
                with contextlib.suppress(Exception):
                    await sqs.delete_queue(QueueUrl=self.queue_url)
        return self.report

    async def _cleanup(self) -> None:
        with contextlib.suppress(ApiException):
            await self.core.delete_namespace(self.namespace)
        await delete_nodepool(self.api, self.pool)
        with contextlib.suppress(ApiException):
            for node in (await self.core.list_node(label_selector=f"{RUN_LABEL}={self.run_id}")).items:
                if node.metadata.finalizers:
                    await self.core.patch_node(node.metadata.name, {"metadata": {"finalizers": None}})
                with contextlib.suppress(ApiException):
                    await self.core.delete_node(node.metadata.name)
        with contextlib.suppress(ApiException):
            await client.CoordinationV1Api(self.api).delete_namespaced_lease(f"ebb-planner-sys-{self.run_id}",
                                                                             "default")
        await remove_crds(self.api, self.crds)
        for server in (self.postgres, self.kafka):
            if server is not None:
                await asyncio.to_thread(server.close)


def _database_down(error: BaseException) -> bool:
    """A failure of the database's connection (it is restarting), not of the query."""
    return isinstance(error, OSError | asyncio.TimeoutError) or type(error).__module__.startswith("asyncpg")


def _marked(node: Any) -> bool:
    """Tainted by a disruption or cordoned."""
    taints = node.spec.taints or []
    return bool(node.spec.unschedulable) or any(t.key in (DISRUPTED, "ebb.sh/disrupted") for t in taints)


def _cpu(pod: Any) -> float:
    total = 0.0
    for container in pod.spec.containers:
        value = str(((container.resources.requests or {}) if container.resources else {}).get("cpu", "0"))
        total += float(value[:-1]) / 1000 if value.endswith("m") else float(value)
    return total


def _annotation(event: AuditEvent, key: str) -> str | None:
    body = event.body if isinstance(event.body, Mapping) else {}
    value = ((body.get("metadata") or {}).get("annotations") or {}).get(key)
    return str(value) if value else None
