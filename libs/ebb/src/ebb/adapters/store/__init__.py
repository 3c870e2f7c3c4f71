"""The store: SQLAlchemy tables and Alembic migrations (PostgreSQL; SQLite in embedded mode), read and written
by the planner, the executor and the decisions-api through one class, ``decision_store.DecisionStore``."""

from ebb.adapters.store.migrate import current_revision, upgrade, upgrade_async
from ebb.adapters.store.models import metadata

__all__ = ["current_revision", "metadata", "upgrade", "upgrade_async"]
