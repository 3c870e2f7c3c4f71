"""Settings of the decisions-api service, read from EBB_DECISIONS_API_* environment variables."""

from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Where the decisions-api service finds its servers."""

    model_config = SettingsConfigDict(env_prefix="EBB_DECISIONS_API_")

    kafka_bootstrap: str = "127.0.0.1:9092"
    database_url: str = "postgresql+asyncpg://ebb@127.0.0.1:5432/ebb"
    log_level: str = "info"
