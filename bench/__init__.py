"""Benchmarks: ``make bench`` (``python -m bench``). Not run by the tests."""

from __future__ import annotations

import argparse


def add_query_options(ap: argparse.ArgumentParser) -> None:
    """``--third-person on|off`` and ``--speech-roles on|off``, shared by the retrieval benches that score labelled
    queries (:func:`query_choices` reads them)."""
    ap.add_argument("--third-person", choices=("on", "off"), help="put the queries in the third person (the agent "
                    "named for 'I', 'me', 'my', in the words BM25 matches) or not, whatever the runs' "
                    "memory.third_person_queries [as each run]")
    ap.add_argument("--speech-roles", choices=("on", "off"), help="leave out the lines said the other way than a "
                    "query names ('Who told me', 'What did Kofi tell me') or not, whatever the runs' "
                    "memory.speech_roles [as each run]")


def query_choices(args: argparse.Namespace) -> dict[str, bool | None]:
    """The keyword arguments of :func:`simulacra.tune.prepare` the options of :func:`add_query_options` give:
    ``third_person`` and ``speech_roles``, ``True`` / ``False`` for ``on`` / ``off``, ``None`` (as each run was made)
    without the option."""
    return {name: None if (v := getattr(args, name)) is None else v == "on"
            for name in ("third_person", "speech_roles")}
