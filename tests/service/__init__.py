"""Service tests: the services' handlers on the in-memory bus and SQLite."""
