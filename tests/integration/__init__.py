"""Integration tests against real servers (docs/infrastructure.md); see conftest.py."""
