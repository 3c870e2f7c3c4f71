"""Settings of the termination-executor service, read from EBB_TERMINATION_EXECUTOR_* environment variables."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from ebb.adapters.engine_options import DEFAULT_PATH as DEFAULT_ENGINE_OPTIONS
from ebb.adapters.health import HealthSettings


class Settings(HealthSettings):
    """Where the termination-executor finds the API server, Kafka and the store, and how it drains."""

    model_config = SettingsConfigDict(env_prefix="EBB_TERMINATION_EXECUTOR_")

    #: a kubeconfig file; empty: the in-cluster service account when running in a pod
    #: (KUBERNETES_SERVICE_HOST set), else the default kubeconfig (~/.kube/config or $KUBECONFIG)
    kubeconfig: str = ""
    #: the kubeconfig context (empty: the current one)
    kube_context: str = ""
    kafka_bootstrap: str = "127.0.0.1:9092"
    #: prepended to every topic name on the broker (several installations sharing one Kafka)
    topic_prefix: str = ""
    #: the consumer group on ebb.disruption.commands (also the consumer name in processed_messages)
    group: str = "ebb-termination-executor"
    database_url: str = "postgresql+asyncpg://ebb@127.0.0.1:5432/ebb"
    #: the cluster name of the decisions rows this executor works on
    cluster: str = "default"
    #: a pod not gone this long after its first eviction attempt fails the drain (never force-deleted; an
    #: interruption's node is removed all the same)
    eviction_deadline_seconds: float = Field(default=600.0, gt=0)
    #: backoff between eviction attempts refused by a PodDisruptionBudget (HTTP 429): first wait ...
    eviction_backoff_initial_seconds: float = Field(default=0.5, gt=0)
    #: ... doubled after every refusal, up to this
    eviction_backoff_max_seconds: float = Field(default=10.0, gt=0)
    #: how often an evicted pod is checked for being gone
    poll_interval_seconds: float = Field(default=0.5, gt=0)
    #: a node's drain ends no sooner than this after its taint: its pods are listed again until then, so a pod the
    #: scheduler bound before it saw the taint is evicted too (Karpenter's MinDrainTime)
    min_drain_seconds: float = Field(default=5.0, ge=0)
    #: commands executed at once (each on nodes no other running command has; 1: one after the other). Karpenter's
    #: disruption queue runs its commands concurrently too: one waiting for a replacement to boot or for a PDB
    #: does not hold back the others, whose nodes count against the budget until they are done
    concurrency: int = Field(default=10, ge=1, le=100)
    #: a failed decision leaves an automatic hold on its nodes for this long, so the planner does not propose
    #: the same failing disruption at its next pass (0: no hold)
    failure_hold_seconds: float = Field(default=900.0, ge=0)
    #: how often the outbox relay looks for steps an executor that stopped left unpublished (what this process
    #: writes is relayed at once)
    relay_poll_seconds: float = Field(default=1.0, gt=0)
    #: sent outbox messages are removed after this long
    outbox_keep_seconds: float = Field(default=3600.0, gt=0)
    #: count a pod whose deletion has started (deletionTimestamp set) as gone
    terminating_is_gone: bool = False
    #: where ebb meets machines (``ebb.adapters.provider``): karpenter (next to a real Karpenter: replacements
    #: are NodeClaims, a node is retired by deleting its NodeClaim, ebb's own ebb.sh/disrupted taint), kwok
    #: (KWOK nodes: the local and test clusters' cloud; ebb deletes Nodes itself) or none (ebb deletes Nodes
    #: itself; a command with replacements fails)
    provider: Literal["none", "kwok", "karpenter"] = "none"
    #: the cluster-wide engine options (the ConfigMap ebb-engine-options, mounted as a directory, or a YAML file):
    #: its ``provider``, when it sets one, replaces ``provider``, so the executor and the planner agree
    engine_options: str = DEFAULT_ENGINE_OPTIONS
    #: deprecated spelling of ``provider`` (none or kwok), taken when ``provider`` is not set
    launcher: Literal["none", "kwok"] | None = None
    #: launched replacements not Ready this long fail the command (it is rolled back)
    replacement_ready_timeout_seconds: float = Field(default=600.0, gt=0)
    #: a command that starts more than this many seconds after the planner approved it (the executor was down or
    #: behind) fails without being carried out and without a hold, so the planner decides again on the cluster of
    #: now; interruptions are exempt. A command normally starts within a second of its approval, or when one of the
    #: ``concurrency`` running ones ends
    max_command_age_seconds: float = Field(default=300.0, gt=0)
    #: retired nodes not gone this long after their removal was asked for fail the command (karpenter: the
    #: NodeClaim or its Node still there)
    retire_timeout_seconds: float = Field(default=600.0, gt=0)
    #: seconds between two looks for deleted Nodes that carry ebb's finalizer ``ebb.sh/termination`` (kwok
    #: provider: the nodes ebb launched), each drained before its finalizer is removed
    finalizer_interval_seconds: float = Field(default=5.0, gt=0)
    #: write Kubernetes Events (DisruptionTerminating, DisruptionLaunching, FailedDraining, ...)
    events_enabled: bool = True
    #: the namespace the Events are written to (Nodes are cluster-scoped)
    events_namespace: str = "default"
    events_component: str = "ebb-termination-executor"
    #: at most this many Event writes a second
    events_qps: float = Field(default=5.0, gt=0)
    #: ``enforce``: execute the planner's commands. ``shadow`` (docs/shadow.md, with the planner in shadow mode, which
    #: sends no command): consume nothing, make no Kubernetes client, write nothing to the cluster; only the health
    #: endpoints answer, so the manifests can stay as they are
    mode: Literal["enforce", "shadow"] = "enforce"
    #: CloudEvent source of the published events
    source: str = "/ebb/termination-executor"
    log_level: str = "info"

    @model_validator(mode="after")
    def _launcher_is_the_old_provider(self) -> Settings:
        if self.launcher is not None and "provider" not in self.model_fields_set:
            self.provider = self.launcher
        return self
