"""`ebb.core.memo.Memo`: at most its size of entries, made room for as its rule says."""

from __future__ import annotations

import threading
from typing import Literal

import pytest

from ebb.core.memo import Memo


@pytest.mark.parametrize(("forget", "keys", "kept"), [
    ("all", "abc", "abc"),
    ("all", "abcd", "d"),  # the fourth key: the three before are forgotten
    ("all", "abcdefg", "g"),
    ("oldest", "abcd", "bcd"),
    ("oldest", "abcdefg", "efg"),
    ("oldest", "abca", "bca"),  # kept again: the newest, and nothing forgotten
    ("oldest", "abcad", "cad"),  # so ``b`` is the oldest when ``d`` comes
    ("all", "abca", "bca"),
])
def test_a_memo_keeps_at_most_its_size(forget: Literal["all", "oldest"], keys: str, kept: str) -> None:
    memo: Memo[str, int] = Memo(3, forget=forget)
    for i, key in enumerate(keys):
        assert memo.keep(key, i) == i
    assert "".join(memo) == kept
    assert all(memo[key] == keys.rindex(key) for key in kept)


def test_a_memo_holds_at_least_one_entry() -> None:
    with pytest.raises(ValueError, match="at least one entry"):
        Memo(0)
    one: Memo[str, int] = Memo(1, forget="oldest")
    one.keep("a", 1)
    one.keep("b", 2)
    assert dict(one) == {"b": 2}


@pytest.mark.parametrize("forget", ["all", "oldest"])
def test_threads_keeping_at_once_never_pass_the_size(forget: Literal["all", "oldest"]) -> None:
    memo: Memo[tuple[int, int], int] = Memo(7, forget=forget)
    seen: list[int] = []
    start = threading.Barrier(4)

    def add(thread: int) -> None:
        start.wait()
        for i in range(2_000):
            memo.keep((thread, i), i)
            seen.append(len(memo))

    threads = [threading.Thread(target=add, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert max(seen) <= 7
    assert 1 <= len(memo) <= 7
