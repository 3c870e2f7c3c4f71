"""What a command said: typer's error box frames and wraps a message as wide as the terminal, so a test reads the
words without the box's borders and the line breaks (a long temporary path would otherwise split a phrase)."""

import re

_BOX_AND_BREAKS = re.compile(r"[\s│╭╮╰╯─]+")


def said(output: str) -> str:
    """The words of a command's output on one line, without rich's box."""
    return _BOX_AND_BREAKS.sub(" ", output).strip()
