"""The one rule for the small caches of retrieval: keep the answer for the last key asked.

A tier's mirror keeps, until its next write, what a tick's retrievals ask for again and again (the cheap score part
at one game time, the importance, the last query's dense and lexical relevance); a memory stream keeps its scoring
parameters until its config changes. Each is a :class:`LastAnswer`: key and answer live in one attribute, read once,
so that a thread reading while another replaces it never pairs one key with the other's answer.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class LastAnswer(Generic[T]):
    """The answer for the last key asked; ``get(key, compute)`` calls ``compute()`` only for a new key."""

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        self._kept: tuple[Hashable, T] | None = None

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        kept = self._kept
        if kept is not None and kept[0] == key:
            return kept[1]
        answer = compute()
        self._kept = (key, answer)
        return answer
