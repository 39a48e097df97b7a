"""The importance rater of seed 003 served over HTTP: a thin Flask shell over :mod:`simulacra.rating`.

``create_app(backend)`` builds the app (:mod:`.app`: ``POST /rate``, ``/rate/batch``, ``/reflect``, ``GET /health``);
``python -m rater_server`` (or ``simulacra rater``) serves it with waitress (:mod:`.cli`); :class:`ThreadedServer`
serves it on a thread of the calling process (:mod:`.serve`). This package imports simulacra; simulacra never
imports it (a run rates in-process when no rater answers at its ``rater.url``).
"""

from rater_server.app import create_app
from rater_server.serve import ThreadedServer

__all__ = ["ThreadedServer", "create_app"]
