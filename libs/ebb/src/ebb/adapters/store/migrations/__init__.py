"""Alembic environment and revisions for the store (run through ``ebb db upgrade``)."""
