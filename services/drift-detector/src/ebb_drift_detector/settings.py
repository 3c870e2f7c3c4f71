"""Settings of the drift-detector service, read from EBB_DRIFT_DETECTOR_* environment variables."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Where the drift-detector finds Kafka and the API server, and how often it recomputes."""

    model_config = SettingsConfigDict(env_prefix="EBB_DRIFT_DETECTOR_")

    kafka_bootstrap: str = "127.0.0.1:9092"
    #: prepended to every topic name on the broker (several installations sharing one Kafka)
    topic_prefix: str = ""
    #: the consumer group reading ebb.cluster.objects
    group: str = "ebb-drift-detector"
    #: a kubeconfig file; empty: the in-cluster service account when running in a pod
    #: (KUBERNETES_SERVICE_HOST set), else the default kubeconfig (~/.kube/config or $KUBECONFIG)
    kubeconfig: str = ""
    #: the kubeconfig context (empty: the current one)
    kube_context: str = ""
    #: annotate drifted Nodes with ebb.sh/drifted (and remove it when the drift is gone)
    annotate_nodes: bool = True
    #: findings are recomputed at most this often after changes to the cluster objects
    debounce_seconds: float = Field(default=2.0, ge=0)
    #: and at least this often without any change (time alone expires nodes and makes them stable)
    resync_seconds: float = Field(default=30.0, gt=0)
    #: CloudEvent source of the published findings
    source: str = "/ebb/drift-detector"
    database_url: str = "postgresql+asyncpg://ebb@127.0.0.1:5432/ebb"
    log_level: str = "info"
