"""Settings of the cluster-watcher service, read from EBB_CLUSTER_WATCHER_* environment variables."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from ebb.adapters.health import HealthSettings
from ebb.adapters.kube.kinds import KINDS, kinds_named


class Settings(HealthSettings):
    """Where the cluster-watcher finds the API server and Kafka, and what it watches."""

    model_config = SettingsConfigDict(env_prefix="EBB_CLUSTER_WATCHER_")

    #: a kubeconfig file; empty: the in-cluster service account when running in a pod
    #: (KUBERNETES_SERVICE_HOST set), else the default kubeconfig (~/.kube/config or $KUBECONFIG)
    kubeconfig: str = ""
    #: the kubeconfig context (empty: the current one)
    kube_context: str = ""
    kafka_bootstrap: str = "127.0.0.1:9092"
    #: prepended to every topic name on the broker (several installations sharing one Kafka)
    topic_prefix: str = ""
    #: the kinds to list and watch, comma-separated (EBB_CLUSTER_WATCHER_KINDS=Node,Pod)
    kinds: Annotated[tuple[str, ...], NoDecode] = tuple(KINDS)
    #: server-side timeout of one watch request; the watch resumes from the last resourceVersion
    watch_timeout_seconds: int = Field(default=300, ge=10)
    #: how often a kind whose CRD is missing is tried again
    missing_kind_retry_seconds: float = Field(default=30.0, gt=0)
    #: list page size
    page_size: int = Field(default=500, ge=1)
    #: CloudEvent source of the published messages
    source: str = "/ebb/cluster-watcher"
    database_url: str = "postgresql+asyncpg://ebb@127.0.0.1:5432/ebb"
    log_level: str = "info"

    @field_validator("kinds", mode="before")
    @classmethod
    def _split_kinds(cls, value: object) -> object:
        if isinstance(value, str):
            value = [v for v in value.split(",") if v.strip()]
        return value

    @field_validator("kinds")
    @classmethod
    def _known_kinds(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        specs = kinds_named(value)
        if not specs:
            raise ValueError("at least one kind must be watched")
        return tuple(s.kind for s in specs)
