"""``python -m ebb_termination_executor``: run the termination-executor until SIGTERM or SIGINT.

A stop lets a command being executed finish a step; a drain waiting on a pod is interrupted, its
command left uncommitted and resumed after the restart."""

from __future__ import annotations

from ebb.adapters.service import load_settings, serve
from ebb_termination_executor import app
from ebb_termination_executor.settings import Settings


def main() -> None:
    serve(load_settings(Settings), app.run)


if __name__ == "__main__":
    main()
