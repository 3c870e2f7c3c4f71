"""Settings of the decisions-api service, read from EBB_DECISIONS_API_* environment variables.

The API serves the store (decisions, holds) and the live cluster state it rebuilds from Kafka: where
Kafka is, which topic prefix and consumer-group prefix to use, and the limits of the event stream
(per-subscriber queue, keep-alive, send timeout) are all settings so an operator can tune them.
"""

from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from ebb.adapters.engine_options import DEFAULT_PATH as DEFAULT_ENGINE_OPTIONS


class Settings(BaseSettings):
    """Where the decisions-api service listens, which store and Kafka it reads and the token it expects."""

    model_config = SettingsConfigDict(env_prefix="EBB_DECISIONS_API_")

    kafka_bootstrap: str = "127.0.0.1:9092"
    #: prepended to every topic name on the broker (several installations sharing one Kafka)
    topic_prefix: str = ""
    #: prefix of the consumer groups reading ebb.cluster.objects and ebb.disruption.events; each process
    #: adds a unique suffix (every replica needs the whole cluster and every event)
    group: str = "ebb-decisions-api"
    #: CloudEvent source of what the API writes (dead letters)
    source: str = "/ebb/decisions-api"
    #: the store (postgresql://, postgresql+asyncpg://; sqlite:// in embedded mode)
    database_url: str = "postgresql+asyncpg://ebb@127.0.0.1:5432/ebb"
    #: the cluster whose decisions and holds this API serves (rows are kept per cluster)
    cluster: str = "default"
    #: the bearer token every /v1 request must carry (EBB_DECISIONS_API_TOKEN); required to start
    token: SecretStr | None = None
    #: a second bearer token that may only read (EBB_DECISIONS_API_READ_TOKEN): every GET, and POST /v1/plan (a dry
    #: run); a write (POST or DELETE /v1/holds) with it is refused with 403. Unset: only the token above is accepted
    read_token: SecretStr | None = None
    #: a service listens on all interfaces of its pod
    host: str = "0.0.0.0"
    port: int = Field(default=8080, ge=1, le=65535)
    log_level: str = "info"
    #: the largest snapshot POST /v1/plan accepts, in bytes (a 10,000-node dump is ~100 MiB)
    max_plan_bytes: int = Field(default=256 * 1024 * 1024, ge=1)
    #: how long /readyz waits for the database
    ready_timeout_seconds: float = Field(default=2.0, gt=0)
    #: the cluster-wide engine options the planner reads too (the ConfigMap ebb-engine-options mounted as a
    #: directory, or a YAML file; ``ebb.core.options``): what it sets replaces spot_to_spot and provider below, which
    #: stand where it sets nothing or does not exist (empty: not read)
    engine_options: str = DEFAULT_ENGINE_OPTIONS
    #: spot nodes may be replaced by spot nodes, in live plans (``spotToSpot`` of the engine options replaces it)
    spot_to_spot: bool = False
    #: the termination-executor's provider: with karpenter a node without a NodeClaim is not a candidate, and live
    #: plans say so (``provider`` of the engine options replaces it)
    provider: Literal["none", "kwok", "karpenter"] = "none"
    #: check for conflicts with Karpenter (``ebb.core.conflicts``): /readyz lists them (``conflicts``) and live
    #: explanations refuse a conflicting NodePool as the planner does; the embedded mode turns it off (no Karpenter)
    check_conflicts: bool = True
    #: ebb's interruption-ingester runs (the manifests deploy it): the check warns when Karpenter's queue is set too
    interruption_ingester: bool = True
    #: engine passes (plan, explain, budgets) running at once in worker threads; more wait their turn
    max_concurrent_passes: int = Field(default=2, ge=1)
    #: events a /v1/events subscriber may have waiting; one more and it is closed (it fell too far behind)
    sse_queue_size: int = Field(default=1000, ge=1)
    #: a keep-alive comment is sent on an idle /v1/events stream this often
    sse_keepalive_seconds: float = Field(default=15.0, gt=0)
    #: a /v1/events write that does not complete in this time ends the stream (a stuck client)
    sse_send_timeout_seconds: float = Field(default=30.0, gt=0)
    #: the longest wait between attempts to reach Kafka again after an error
    kafka_retry_max_seconds: float = Field(default=30.0, gt=0)
