"""Settings of the decisions-api service, read from EBB_DECISIONS_API_* environment variables."""

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Where the decisions-api service listens, which store it reads and the token it expects."""

    model_config = SettingsConfigDict(env_prefix="EBB_DECISIONS_API_")

    kafka_bootstrap: str = "127.0.0.1:9092"
    #: the store (postgresql://, postgresql+asyncpg://; sqlite:// in embedded mode)
    database_url: str = "postgresql+asyncpg://ebb@127.0.0.1:5432/ebb"
    #: the cluster whose decisions and holds this API serves (rows are kept per cluster)
    cluster: str = "default"
    #: the bearer token every /v1 request must carry (EBB_DECISIONS_API_TOKEN); required to start
    token: SecretStr | None = None
    #: a service listens on all interfaces of its pod
    host: str = "0.0.0.0"
    port: int = Field(default=8080, ge=1, le=65535)
    log_level: str = "info"
    #: the largest snapshot POST /v1/plan accepts, in bytes (a 10,000-node dump is ~100 MiB)
    max_plan_bytes: int = Field(default=256 * 1024 * 1024, ge=1)
    #: how long /readyz waits for the database
    ready_timeout_seconds: float = Field(default=2.0, gt=0)
