"""``python -m ebb_drift_detector``: run the drift-detector until SIGTERM or SIGINT."""

from __future__ import annotations

from ebb.adapters.service import serve
from ebb_drift_detector import app
from ebb_drift_detector.settings import Settings


def main() -> None:
    serve(Settings(), app.run)


if __name__ == "__main__":
    main()
