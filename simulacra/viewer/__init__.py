"""Replay viewer: play a finished run from its ``trace.jsonl`` alone (``simulacra replay``).

- :mod:`simulacra.viewer.state` — :class:`ReplayState`, the pure per-tick snapshots, news, talks, objects (no pygame).
- :mod:`simulacra.viewer.memory` — :class:`MemoryIndex`, the memory browser's model: an agent's memories at tick T
  rebuilt from the trace's memory operations (no pygame).
- :mod:`simulacra.viewer.layout` — the camera, crowds, hit-testing, the timeline's mapping, the view's state and the
  list of controls (no pygame).
- :mod:`simulacra.viewer.render` — :class:`Renderer`, draws a snapshot on a pygame Surface.
- :mod:`simulacra.viewer.app` — the window loop, the controls (:class:`Player`) and headless screenshots.

pygame is imported by ``render`` and ``app`` only, never by the rest of simulacra.
"""

from simulacra.viewer.memory import MemoryDetail, MemoryIndex, MemoryRow
from simulacra.viewer.state import AgentView, ReplayState, Retrieval, RetrievedMemory, TickState, Utterance

__all__ = ["AgentView", "MemoryDetail", "MemoryIndex", "MemoryRow", "ReplayState", "Retrieval", "RetrievedMemory",
           "TickState", "Utterance"]
