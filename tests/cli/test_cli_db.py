"""`ebb db` on a database it cannot use: one line on stderr naming the URL (never its password) and the cause,
exit 1 for an operational failure and 2 for a URL that is no database URL; never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ebb_cli.main import app

# a worker thread of the database driver that dies after the command returned is a failure too (aiosqlite's
# worker answering on an event loop already closed: omnilib/aiosqlite#241)
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")


@pytest.mark.parametrize(("url", "code", "words"), [
    # nothing listens on port 1: the connection is refused at once
    ("postgresql+asyncpg://ebb:s3cret@127.0.0.1:1/ebb", 1, "cannot use the database at postgresql+asyncpg://ebb:***@"),
    ("sqlite:///{tmp}/no/such/dir/ebb.sqlite", 1, "cannot use the database at sqlite:///"),
    ("nonsense://x", 2, "--database-url: nonsense://x is not a database URL"),
    ("not a url", 2, "--database-url: the given URL is not a database URL"),
])
@pytest.mark.parametrize("command", ["current", "upgrade"])
def test_unusable_database(tmp_path: Path, command: str, url: str, code: int, words: str) -> None:
    result = CliRunner().invoke(app, ["db", command, "--database-url", url.format(tmp=tmp_path)])
    assert result.exit_code == code, result.output
    assert words in result.stderr
    assert "Traceback" not in result.output and "s3cret" not in result.output
    assert len(result.stderr.strip().splitlines()) <= 2  # the message (and SQLAlchemy's one-line link), no stack
