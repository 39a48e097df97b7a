"""The labelled query file of ``simulacra tune`` (``docs/tuning.md``): its records and :func:`load_queries`, which
validates a file and names the file and the field (``queries.<index>.<field>``) of the first problem."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulacra.clock import MINUTES_PER_DAY, parse_hhmm
from simulacra.errors import InputError, read_yaml

#: the splits of a query file: searched on (``train``) or only scored (``heldout``)
SPLITS = ("train", "heldout")


@dataclass(frozen=True)
class Expected:
    """One expected memory of a labelled query: ``id`` or ``text`` (exactly one is set)."""

    id: str | None = None
    text: str | None = None

    def __str__(self) -> str:
        return f"id {self.id}" if self.id is not None else f"text {self.text!r}"


@dataclass(frozen=True)
class LabelledQuery:
    """A query of a query file. ``time`` is in game minutes (``None``: the run's last tick)."""

    index: int
    agent: str
    query: str
    time: float | None
    expected: tuple[Expected, ...]
    note: str | None = None
    split: str = "train"
    category: str | None = None


_HEX_ID = re.compile(r"[0-9a-f]{24}")


def _parse_time(value: Any, file: Path, where: str, start_minute: int | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise InputError(file, where, f"expected game minutes or 'HH:MM', got {value!r}")
    if isinstance(value, (int, float)):
        if not (math.isfinite(value) and value >= 0):
            raise InputError(file, where, f"game minutes must be a finite number >= 0, got {value}")
        return float(value)
    if isinstance(value, str):
        try:
            minute = parse_hhmm(value.strip())
        except ValueError as err:
            raise InputError(file, where, f"expected game minutes or 'HH:MM': {err}") from None
        day = (start_minute or 0) // MINUTES_PER_DAY  # 'HH:MM' is on the run's first day
        return float(day * MINUTES_PER_DAY + minute)
    raise InputError(file, where, f"expected game minutes or 'HH:MM', got {type(value).__name__}")


def load_queries(path: str | Path, start_minute: int | None = None) -> list[LabelledQuery]:
    """The queries of a query file (:func:`load_query_file` without the run it names)."""
    return load_query_file(path, start_minute)[1]


def load_query_file(path: str | Path, start_minute: int | None = None) -> tuple[str | None, list[LabelledQuery]]:
    """Read a query file (``docs/tuning.md``): a mapping with ``queries:`` (and optionally ``run:``, the name of the
    run folder it was made for, as :mod:`simulacra.labels` writes it), or a bare list of queries. Returns
    ``(run, queries)``, ``run`` ``None`` when the file names none.

    Each query: ``agent``, ``query`` (text), optional ``time`` (game minutes, or ``"HH:MM"`` on the run's first
    day, given by ``start_minute``), ``expected`` (a non-empty list of ``{id: ...}``, ``{text: ...}`` or plain
    strings: a 24-hex id, else a text), optional ``note``, optional ``split`` (``train``, the default, or
    ``heldout``: not searched on, only scored), optional ``category`` (a label such as ``said``, ``who``, ``when``,
    ``plan``: :func:`by_category` reports per category).

    Raises:
        InputError: naming the file and ``queries.<index>.<field>`` of the first problem.
    """
    file = Path(path)
    data = read_yaml(file)
    items = data.get("queries") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise InputError(file, "queries", "expected a non-empty list of queries")
    run = data.get("run") if isinstance(data, dict) else None
    if run is not None and (not isinstance(run, str) or not run.strip()):
        raise InputError(file, "run", f"expected the name of the run folder the queries were made for, got {run!r}")
    out = []
    for i, item in enumerate(items):
        where = f"queries.{i}"
        if not isinstance(item, dict):
            raise InputError(file, where, f"expected a mapping, got {type(item).__name__}")
        unknown = set(item) - {"agent", "query", "time", "expected", "note", "split", "category"}
        if unknown:
            raise InputError(file, f"{where}.{sorted(unknown)[0]}",
                             "unknown field (known: agent, query, time, expected, note, split, category)")
        category = item.get("category")
        if category is not None and (not isinstance(category, str) or not category.strip()):
            raise InputError(file, f"{where}.category", "expected a non-empty string (said, who, when, plan ...)")
        split = item.get("split", "train")
        if split not in SPLITS:
            raise InputError(file, f"{where}.split", f"expected one of {', '.join(SPLITS)}, got {split!r}")
        for key in ("agent", "query"):
            if not isinstance(item.get(key), str) or not item[key].strip():
                raise InputError(file, f"{where}.{key}", "required, a non-empty string")
        raw = item.get("expected")
        if not isinstance(raw, list) or not raw:
            raise InputError(file, f"{where}.expected", "required, a non-empty list of {id: ...} or {text: ...}")
        expected = []
        for j, e in enumerate(raw):
            ew = f"{where}.expected.{j}"
            if isinstance(e, str) and e.strip():
                e = {"id": e} if _HEX_ID.fullmatch(e.strip()) else {"text": e}
            if not isinstance(e, dict) or len(e) != 1 or next(iter(e)) not in ("id", "text"):
                raise InputError(file, ew, "expected {id: <memory id>} or {text: <memory text>}")
            key, value = next(iter(e.items()))
            if not isinstance(value, str) or not value.strip():
                raise InputError(file, f"{ew}.{key}", "expected a non-empty string")
            expected.append(Expected(**{key: value.strip()}))
        out.append(LabelledQuery(i, item["agent"].strip(), item["query"].strip(),
                                 _parse_time(item.get("time"), file, f"{where}.time", start_minute),
                                 tuple(expected), item.get("note"), split, category))
    return (None if run is None else run.strip()), out

