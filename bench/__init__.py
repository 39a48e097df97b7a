"""Benchmarks: ``make bench`` (``python -m bench``). Not run by the tests."""

from __future__ import annotations

import argparse


def add_third_person_option(ap: argparse.ArgumentParser) -> None:
    """``--third-person on|off``, shared by the retrieval benches that score labelled queries
    (:func:`third_person_choice` reads it)."""
    ap.add_argument("--third-person", choices=("on", "off"), help="put the queries in the third person (the agent "
                    "named for 'I', 'me', 'my', in the words BM25 matches) or not, whatever the runs' "
                    "memory.third_person_queries [as each run]")


def third_person_choice(args: argparse.Namespace) -> bool | None:
    """``True`` / ``False`` for ``--third-person on`` / ``off``; ``None`` (as each run was made) without it."""
    return None if args.third_person is None else args.third_person == "on"
