"""ebb's tests: unit (pure core), property, service (in-memory bus, SQLite) and integration (real servers)."""
