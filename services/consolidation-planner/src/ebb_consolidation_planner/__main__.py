"""``python -m ebb_consolidation_planner``: run the consolidation-planner until SIGTERM or SIGINT."""

from __future__ import annotations

from ebb.adapters.service import load_settings, serve
from ebb_consolidation_planner import app
from ebb_consolidation_planner.settings import Settings


def main() -> None:
    serve(load_settings(Settings), app.run)


if __name__ == "__main__":
    main()
