"""Shared by every test directory: the kit's assertions are rewritten as a test module's are, so that a failed
``assert`` in a fake or a harness (tests/kit/) shows its values. This must run before anything imports the kit,
which is why it is here, in the outermost conftest."""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("tests.kit")
