"""``python -m ebb_cluster_watcher``: run the cluster-watcher until SIGTERM or SIGINT."""

from __future__ import annotations

from ebb.adapters.service import load_settings, serve
from ebb_cluster_watcher import app
from ebb_cluster_watcher.settings import Settings


def main() -> None:
    serve(load_settings(Settings), app.run)


if __name__ == "__main__":
    main()
