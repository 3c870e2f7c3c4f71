"""Integration tests against real servers (DESIGN §6); see conftest.py."""
