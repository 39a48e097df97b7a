"""The importance rater of seed 003: a Flask app answering ``POST /rate`` with a 1..10 poignancy rating.

``create_app(backend)`` builds the app; backends live in :mod:`simulacra.rating.backends`.
"""

from rater_server.app import create_app

__all__ = ["create_app"]
