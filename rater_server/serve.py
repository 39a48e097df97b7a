"""Serving the rater app: :class:`ThreadedServer` serves it on a background thread of the calling process
(werkzeug's threaded server), for tests, benchmarks and notebooks; ``simulacra rater`` serves it with waitress."""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)


class ThreadedServer:
    """A WSGI app (e.g. :func:`rater_server.create_app`'s) served on ``host:port`` from a daemon thread of this
    process until :meth:`close`. Port 0: a free port the OS picks (:attr:`port`).

    Raises:
        OSError: the port is in use.
    """

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0):
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log line per request
        try:
            self._server = make_server(host, port, app, threaded=True)
        except SystemExit:  # werkzeug exits the process when the port is taken; say it as the OSError it is
            raise OSError(98, f"port {port} is in use") from None
        self.host, self.port = host, self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever, name="rater", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The ``/rate`` endpoint."""
        return f"http://{self.host}:{self.port}/rate"

    def close(self) -> None:
        """Stop serving (safe twice)."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=5)
