"""Thread limits that hold inside simulacra's own calls only (no process-wide setting changes).

torch (the embedding model) and numpy's OpenBLAS (memory scoring) both keep worker threads spinning after their
work; alternating the two on 2 cores made each wait for the other's spinning threads (measured at 100k memories:
query embedding 16.8 -> 9.5 ms with OpenBLAS on one thread, scoring 2.2 -> 2.4 ms; ``docs/memory.md``). The scoring
products are memory-bound, so one thread loses little. :func:`scoring_threads` runs OpenBLAS on one thread for the
length of a ``with`` block (threadpoolctl's limiter, which puts the previous count back on exit); a tick
(:meth:`simulacra.simulation.Simulation.step`) and a retrieval (:meth:`simulacra.memory.stream.AgentMemory.retrieve`)
run inside it, so a notebook's own numpy work keeps its threads.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Iterator

log = logging.getLogger(__name__)

_controller = None
_modules = 0  # len(sys.modules) when the controller was made
_lock = threading.Lock()
_depth = 0  # blocks open now (a retrieval inside a tick, the rater's threads): the outermost one sets and restores
_limiter = None


def _blas_controller():
    """threadpoolctl's view of the process's OpenBLAS libraries, made again whenever modules were imported since
    (an import may load another OpenBLAS: scipy's own, with its own pool, which a view made before it would leave
    unlimited; the scan costs ms, the check a ``len``); ``None`` when threadpoolctl cannot inspect them."""
    global _controller, _modules
    if _controller is None or (_controller is not False and len(sys.modules) != _modules):
        try:
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController().select(internal_api="openblas")
        except Exception:  # pragma: no cover - threadpoolctl missing or an unusual BLAS: keep the defaults
            log.debug("cannot inspect the BLAS thread pools", exc_info=True)
            _controller = False
        _modules = len(sys.modules)  # after the import of threadpoolctl itself
    return _controller or None


@contextlib.contextmanager
def scoring_threads() -> Iterator[None]:
    """Run numpy's OpenBLAS on one thread inside the block; the count it had before is restored when the last open
    block ends. Blocks may nest and may be opened from several threads."""
    global _depth, _limiter
    controller = _blas_controller()
    if controller is None:
        yield
        return
    with _lock:
        _depth += 1
        if _depth == 1:
            _limiter = controller.limit(limits=1)
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _limiter is not None:
                _limiter.restore_original_limits()
                _limiter = None
