"""Settings of the interruption-ingester service, read from EBB_INTERRUPTION_INGESTER_* environment variables."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from ebb.adapters.backoff import Backoff
from ebb.adapters.health import HealthSettings


class Settings(HealthSettings):
    """Where the interruption-ingester finds its queue and Kafka, and how it polls."""

    model_config = SettingsConfigDict(env_prefix="EBB_INTERRUPTION_INGESTER_")

    #: the interruption queue's URL; when empty, ``queue_name`` is looked up (GetQueueUrl)
    queue_url: str = ""
    queue_name: str = ""
    region: str = "us-east-1"
    #: an SQS endpoint other than AWS's (e.g. a moto server); empty: AWS
    endpoint_url: str = ""
    #: SQS long polling: how long one receive waits for a first message (0..20)
    wait_time_seconds: int = Field(default=20, ge=0, le=20)
    #: messages per receive (1..10)
    max_messages: int = Field(default=10, ge=1, le=10)
    #: visibility timeout asked for on receive; None: the queue's own
    visibility_timeout_seconds: int | None = Field(default=None, ge=0, le=43200)
    #: backoff after a failed SQS call or publish: doubling from initial to max, with jitter
    backoff_initial_seconds: float = Field(default=1.0, gt=0)
    backoff_max_seconds: float = Field(default=60.0, gt=0)

    @property
    def backoff(self) -> Backoff:
        """The ingester's one backoff: between failed SQS calls, and between lookups of the queue at start."""
        return Backoff(initial=self.backoff_initial_seconds, maximum=self.backoff_max_seconds)

    kafka_bootstrap: str = "127.0.0.1:9092"
    #: prepended to every topic name on the broker (several installations sharing one Kafka)
    topic_prefix: str = ""
    #: CloudEvent source of the published messages
    source: str = "/ebb/interruption-ingester"
    #: consumer group prefix for reading ebb.cluster.objects (each process adds a unique suffix, so
    #: it reads the whole compacted topic)
    consumer_group: str = "ebb-interruption-ingester"
    #: the port of /healthz, /readyz and /metrics (0: none)
    metrics_port: int = Field(default=9102, ge=0, le=65535)
    database_url: str = "postgresql+asyncpg://ebb@127.0.0.1:5432/ebb"
    log_level: str = "info"

    def require_queue(self) -> None:
        """Raise ValueError unless a queue URL or name is set."""
        if not self.queue_url and not self.queue_name:
            raise ValueError("set EBB_INTERRUPTION_INGESTER_QUEUE_URL or EBB_INTERRUPTION_INGESTER_QUEUE_NAME")
