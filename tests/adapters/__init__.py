"""Tests of the runtime adapters (``ebb.adapters``) that need no server: clocks and virtual time, the Kubernetes
client's paging and configuration, snapshot files and the snapshot store, the bundled catalogs, a decision's row
in the store; the real servers' side is tests/integration."""
