"""The store: SQLAlchemy tables and Alembic migrations (PostgreSQL; SQLite in embedded mode), read and written
by the planner, the executor and the decisions-api through one class, ``decision_store.DecisionStore``; what the
services need of it without a database, ``port.Store``, and the store in memory, ``memory.MemoryStore``.

Importing the package imports no SQLAlchemy (the embedded mode runs on the memory store without it): the
migrations' functions and the tables' metadata are imported when first asked for."""

from __future__ import annotations

from typing import Any

__all__ = ["current_revision", "metadata", "upgrade", "upgrade_async"]


def __getattr__(name: str) -> Any:
    if name in {"current_revision", "upgrade", "upgrade_async"}:
        from ebb.adapters.store import migrate

        return getattr(migrate, name)
    if name == "metadata":
        from ebb.adapters.store.models import metadata

        return metadata
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
