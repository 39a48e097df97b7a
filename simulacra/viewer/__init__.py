"""Replay viewer: play a finished run from its ``trace.jsonl`` alone (``simulacra replay``).

- :mod:`simulacra.viewer.state` — :class:`ReplayState`, the pure per-tick snapshots (no pygame).
- :mod:`simulacra.viewer.render` — :class:`Renderer`, draws a snapshot on a pygame Surface.
- :mod:`simulacra.viewer.app` — the window loop, the controls (:class:`Player`) and headless screenshots.

pygame is imported by ``render`` and ``app`` only, never by the rest of simulacra.
"""

from simulacra.viewer.state import AgentView, ReplayState, Retrieval, RetrievedMemory, TickState, Utterance

__all__ = ["AgentView", "ReplayState", "Retrieval", "RetrievedMemory", "TickState", "Utterance"]
