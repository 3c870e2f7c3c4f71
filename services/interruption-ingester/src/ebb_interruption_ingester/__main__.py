"""``python -m ebb_interruption_ingester``: run the interruption-ingester until SIGTERM or SIGINT."""

from __future__ import annotations

from ebb.adapters.service import load_settings, serve
from ebb_interruption_ingester import app
from ebb_interruption_ingester.settings import Settings


def main() -> None:
    serve(load_settings(Settings), app.run)


if __name__ == "__main__":
    main()
