"""Settings of the consolidation-planner service, read from EBB_CONSOLIDATION_PLANNER_* environment variables."""

from __future__ import annotations

import socket
from typing import Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from ebb.adapters.engine_options import DEFAULT_PATH as DEFAULT_ENGINE_OPTIONS
from ebb.adapters.health import HealthSettings


class Settings(HealthSettings):
    """Where the planner finds Kafka, PostgreSQL and the API server (its Lease), and how often it plans."""

    model_config = SettingsConfigDict(env_prefix="EBB_CONSOLIDATION_PLANNER_")

    kafka_bootstrap: str = "127.0.0.1:9092"
    #: prepended to every topic name on the broker (several installations sharing one Kafka)
    topic_prefix: str = ""
    #: prefix of the consumer group reading ebb.cluster.objects (each replica adds a unique suffix:
    #: every replica needs the whole cluster)
    group: str = "ebb-consolidation-planner"
    database_url: str = "postgresql+asyncpg://ebb@127.0.0.1:5432/ebb"
    #: the cluster name written into decisions, ledger rows and read from holds
    cluster: str = "default"
    #: a kubeconfig file; empty: the in-cluster service account when running in a pod
    #: (KUBERNETES_SERVICE_HOST set), else the default kubeconfig (~/.kube/config or $KUBECONFIG)
    kubeconfig: str = ""
    #: the kubeconfig context (empty: the current one)
    kube_context: str = ""
    #: a pass runs at most this often after changes to the cluster objects
    debounce_seconds: float = Field(default=1.0, ge=0)
    #: and at least this often without any change
    pass_interval_seconds: float = Field(default=10.0, gt=0)
    #: between proposing a command and re-validating it against fresh state (Karpenter: 15 s)
    validation_delay_seconds: float = Field(default=15.0, ge=0)
    #: leader election: the coordination.k8s.io/v1 Lease
    lease_name: str = "ebb-consolidation-planner"
    lease_namespace: str = "default"
    #: this replica's holder identity (default: hostname and a random suffix)
    identity: str = ""
    #: a follower takes the Lease over when it saw no renewal for this long; the leader steps down when it
    #: could not renew for two thirds of it (whole seconds, as the Lease has them)
    lease_duration_seconds: float = Field(default=15.0, ge=2)
    #: how often the leader renews (and a follower retries); at least 1 s (kubernetes-asyncio's leaderelection)
    lease_renew_seconds: float = Field(default=2.0, ge=1)
    #: a budget_ledger row whose holder never released it is reclaimable after this
    ledger_ttl_seconds: float = Field(default=3600.0, gt=0)
    #: the cluster-wide engine options (the ConfigMap ebb-engine-options mounted as a directory, or a YAML file;
    #: ``ebb.core.options``): what it sets replaces spot_to_spot, provider and explain below, which stand where it
    #: sets nothing or does not exist (empty: not read)
    engine_options: str = DEFAULT_ENGINE_OPTIONS
    #: spot nodes may be replaced by spot nodes (``spotToSpot`` of the engine options replaces it)
    spot_to_spot: bool = False
    #: the termination-executor's provider (set it as EBB_TERMINATION_EXECUTOR_PROVIDER): with karpenter a node
    #: without a NodeClaim is not a candidate (ebb retires nodes by deleting their NodeClaim); none and kwok
    #: plan alike (``provider`` of the engine options replaces it)
    provider: Literal["none", "kwok", "karpenter"] = "none"
    #: ``enforce``: ebb disrupts, and refuses to disrupt the nodes of a NodePool that conflicts with Karpenter until it
    #: is fixed (``ebb.core.conflicts``, docs/karpenter.md#the-conflict-check). ``shadow`` (docs/shadow.md): ebb plans
    #: beside a Karpenter that still disrupts, records every decision as a shadow one (which sends no command) and
    #: the removals Karpenter makes, and writes nothing to the cluster but its Lease (no Event, no annotation, no
    #: DisruptionPolicy status, whatever the settings below say)
    mode: Literal["enforce", "shadow"] = "enforce"
    #: check for conflicts with Karpenter at every pass (a log line, ``ebb_conflicts``, a condition on the
    #: DisruptionPolicies); the embedded mode turns it off: its cluster is simulated, there is no Karpenter in it
    check_conflicts: bool = True
    #: write the condition ConflictFree on every DisruptionPolicy's status (with a kube client; RBAC: patch on
    #: disruptionpolicies/status)
    write_policy_status: bool = True
    #: ebb's interruption-ingester runs beside the planner (the manifests deploy it): the conflict check then warns
    #: when Karpenter's own interruption queue is set too
    interruption_ingester: bool = True
    #: publish each computed pass of the leader on ebb.planner.passes, where the decisions-api answers "why not
    #: this node?" (the embedded mode publishes only when it serves the API)
    publish_passes: bool = True
    #: how often the outbox relay looks for messages a planner that stopped left unpublished (what this process
    #: writes is relayed at once)
    relay_poll_seconds: float = Field(default=1.0, gt=0)
    #: sent outbox messages are removed after this long
    outbox_keep_seconds: float = Field(default=3600.0, gt=0)
    #: fault injection, for tests only: the process exits (code 70) when its outbox relay is about to publish a
    #: Proposed event (``proposed``: a proposal is committed, nothing of it published or approved) or a command
    #: (``approved``: an approval is committed, its command not published)
    exit_at: Literal["proposed", "approved"] | None = None
    #: write ebb.sh/drifted (the drift reason) on drifted Nodes and remove it when the drift is gone
    annotate_nodes: bool = True
    #: explain in every pass why each node is left alone (its Events and metrics); the commands are the same
    #: without (``EngineOptions.explain``): the embedded back-test turns it off, nothing there reads them
    #: (``explain`` of the engine options replaces it)
    explain: bool = True
    #: answer a pass from the last one while the snapshot and the store's state are unchanged and no moment at
    #: which a pass could decide differently (``PassResult.revisit_at``) has come; the commands are the same either
    #: way (``ebb_consolidation_planner.pass_inputs``). A reused pass repeats the last one's Kubernetes events and
    #: metrics word for word (an explanation that says how long ago something happened stays as it was). A pass that
    #: is computed takes what consolidating each node alone did on the last one where it still holds
    #: (``PassInputs.alone``); off, every pass is computed whole
    reuse_passes: bool = True
    #: after each computed pass, freeze the objects there are out of the cycle collector's traversals
    #: (``ebb.adapters.heap``): the collector's full collections, half a second on a 20,000-pod cluster, then no longer
    #: land inside a pass; every 100 computed passes one full collection runs after a pass and frees the cycles frozen
    #: since. The embedded mode leaves the collector alone
    freeze_heap: bool = True
    #: Kubernetes Events (Unconsolidatable, DisruptionBlocked, Consolidation*, interruptions) on nodes
    events_enabled: bool = True
    #: the namespace of events about cluster-scoped objects (client-go's choice: default)
    events_namespace: str = "default"
    #: source.component and reportingComponent of the events
    events_component: str = "ebb-consolidation-planner"
    #: at most this many events written per second
    events_qps: float = Field(default=10.0, gt=0)
    #: events waiting to be written; beyond, a pass's events are dropped (and offered again by a later pass)
    events_queue: int = Field(default=1000, ge=1)
    #: CloudEvent source of the published commands and events
    source: str = "/ebb/consolidation-planner"
    log_level: str = "info"

    def holder_identity(self) -> str:
        if self.identity:
            return self.identity
        import uuid

        return f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
