"""ebb decisions-api service: decisions, holds and the dry-run planner over REST (docs/architecture.md)."""
