"""Errors raised by simulacra. Each names the file and the field at fault where there is one.

Every user file (persona JSON, world, config and query YAML) is read through :func:`read_text`, which
turns bad encodings into one-line errors, and YAML through :func:`read_yaml`, which also refuses a key
given twice in one mapping. :func:`validation_problem` turns a pydantic error into a field and a message
(suggesting the closest valid name for a misspelt field).
"""

from __future__ import annotations

import codecs
import difflib
import math
import re
import typing
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import yaml


class SimulacraError(Exception):
    """Base class of every error simulacra raises on purpose."""


class InputError(SimulacraError):
    """A user-supplied file (persona, world, config) is missing a field or has a wrong one.

    The message is kept to one line (line breaks become ``"; "``) so the CLI prints one line.

    Attributes:
        file: the file at fault.
        field: dotted path of the field inside it (``routine.2.place``), or ``None`` for the whole file.
        other_file: a second file involved in a cross-reference error (a routine naming a place unknown
            to the world file), or ``None``.
    """

    kind = "input"

    def __init__(self, file: str | Path, field: str | None, message: str, other_file: str | Path | None = None):
        self.file = str(file)
        self.field = field
        self.message = re.sub(r"\s*\n\s*", "; ", message.strip())
        self.other_file = str(other_file) if other_file is not None else None
        where = self.file if field is None else f"{self.file}: field '{field}'"
        if self.other_file:
            where += f" (checked against {self.other_file})"
        super().__init__(f"{where}: {self.message}")


def read_text(path: str | Path, error: type[InputError] = InputError) -> str:
    """The text of ``path``, decoded as UTF-8 (a leading UTF-8 byte-order mark is dropped); ``""`` when empty.

    Raises:
        error: naming ``path``, when it cannot be read, is UTF-16/UTF-32 (byte-order mark), holds a NUL byte
            (binary data), or is not valid UTF-8 (the message gives the byte, line and column).
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise error(path, None, f"cannot read: {err.strerror or err}") from None
    for bom, name in ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
                      (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16")):
        if raw.startswith(bom):
            raise error(path, None, f"the file is {name} text (it starts with a {name} byte-order mark); "
                                    "expected UTF-8: save it as UTF-8")
    raw = raw.removeprefix(codecs.BOM_UTF8)
    nul = raw.find(b"\x00")
    if nul >= 0:
        line, col = _line_col(raw, nul)
        raise error(path, None, f"not a text file: a NUL byte at line {line} column {col} (binary data, or UTF-16 "
                                "without a byte-order mark); expected UTF-8 text")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line, col = _line_col(raw, err.start)
        raise error(path, None, f"not UTF-8 text: byte 0x{raw[err.start]:02x} at line {line} column {col} cannot "
                                "be decoded (Latin-1 or Windows-1252?); save the file as UTF-8") from None


def _line_col(raw: bytes, pos: int) -> tuple[int, int]:
    """1-based line and character column of byte offset ``pos``."""
    start = raw.rfind(b"\n", 0, pos) + 1
    return raw.count(b"\n", 0, pos) + 1, len(raw[start:pos].decode("utf-8", "replace")) + 1


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A YAML mapping gives one key twice (``path`` is the dotted path of the second one)."""

    def __init__(self, path: list[str], key: Any, mark: yaml.Mark, first: yaml.Mark):
        super().__init__(None, None, f"duplicate key {key!r}", mark)
        self.path, self.key, self.line, self.first_line = path, key, mark.line + 1, first.line + 1


_HHMM = re.compile(r"^[0-9]{1,2}:[0-9]{2}$")


def is_whole(value: Any) -> bool:
    """Whether ``value`` is an integer (a numpy one too), not a bool (``True`` is 1 to Python, not a count)."""
    return isinstance(value, Integral) and not isinstance(value, bool)


def is_finite_number(value: Any) -> bool:
    """Whether ``value`` is a real number (a numpy one too) that is finite, not a bool: ``nan`` and ``inf`` pass
    every ``>=`` / ``<=`` range check the wrong way, so a bound alone does not refuse them."""
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


class DuplicatedKeys(dict):
    """A JSON object that gave ``key`` more than once (the last value kept, as ``json`` does), as
    :func:`mark_duplicate_keys` builds it; :func:`duplicate_key_path` finds it."""

    key: str = ""


def mark_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    """``json.loads``' ``object_pairs_hook``: the object, a :class:`DuplicatedKeys` when a key is given twice
    (plain JSON keeps the last one silently). The one rule for JSON files and request bodies, as
    :class:`UniqueKeyLoader` is for YAML."""
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    marked, seen = DuplicatedKeys(obj), set()
    for key, _ in pairs:
        if key in seen:
            marked.key = key
            break
        seen.add(key)
    return marked


def duplicate_key_path(data: Any) -> list[str] | None:
    """The dotted path (as parts) of a key given twice in one object of ``data`` (parsed with
    :func:`mark_duplicate_keys`), the first in document order; ``None`` when every key is given once. Iterative:
    any depth ``json`` parsed."""
    stack: list[tuple[Any, list[str]]] = [(data, [])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, DuplicatedKeys):
            return path + [node.key]
        if isinstance(node, dict):
            stack.extend(reversed([(v, path + [str(k)]) for k, v in node.items()]))
        elif isinstance(node, list):
            stack.extend(reversed([(v, path + [str(i)]) for i, v in enumerate(node)]))
    return None


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader, except that a key given twice in one mapping raises :class:`DuplicateKeyError`
    (plain YAML keeps the last one silently), and that a plain ``HH:MM`` scalar (``10:30``) is a string,
    not YAML 1.1's base-60 integer (630).

    Keys brought in by a merge (``<<: *anchor``) may be overridden as usual.
    """

    yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    for _digit in "0123456789":
        yaml_implicit_resolvers.setdefault(_digit, []).insert(0, ("tag:yaml.org,2002:str", _HHMM))

    def construct_document(self, node):
        self._check_unique(node, [], set())
        return super().construct_document(node)

    def _check_unique(self, node, path: list[str], seen: set[int]) -> None:
        if id(node) in seen:  # an alias of a node already walked
            return
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, yaml.Mark] = {}
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                if isinstance(key_node, yaml.ScalarNode):
                    key = self.construct_object(key_node)
                    if key in first:
                        raise DuplicateKeyError(path + [str(key)], key, key_node.start_mark, first[key])
                    first[key] = key_node.start_mark
                    self._check_unique(value_node, path + [str(key)], seen)
                else:
                    self._check_unique(value_node, path + ["?"], seen)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._check_unique(item, path + [str(i)], seen)


def _yaml_problem(err: yaml.YAMLError) -> str:
    """One line saying where and what a YAML syntax error is."""
    if isinstance(err, yaml.MarkedYAMLError) and (err.problem_mark or err.context_mark):
        mark = err.problem_mark or err.context_mark
        what = err.problem or err.context or "syntax error"
        if err.context and err.context_mark and err.problem:
            what += f" ({err.context} at line {err.context_mark.line + 1})"
        if "\\t" in what or "\t" in what:
            what += "; indent YAML with spaces, not tabs"
        return f"not valid YAML at line {mark.line + 1} column {mark.column + 1}: {what}"
    return f"not valid YAML: {' '.join(str(err).split())}"


def read_yaml(path: str | Path, error: type[InputError] = InputError):
    """The YAML document in ``path`` (``None`` for an empty file), read with :class:`UniqueKeyLoader`.

    Raises:
        error: naming ``path``, when it cannot be read (see :func:`read_text`), is not valid YAML (line and
            column given), or gives a key twice in one mapping (field = the key's dotted path, both lines given).
    """
    text = read_text(path, error)
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except DuplicateKeyError as err:
        raise error(path, ".".join(err.path), f"key {err.key!r} given twice in one mapping (lines {err.first_line} "
                                              f"and {err.line}); expected each key once") from None
    except yaml.YAMLError as err:
        raise error(path, None, _yaml_problem(err)) from None
    except RecursionError:
        raise error(path, None, "not valid YAML: nested too deeply") from None


def _unwrap(tp: Any) -> Any:
    """The model or container type inside ``Annotated[...]`` and ``X | None``."""
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin is typing.Union or type(tp).__name__ == "UnionType":
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def _known_fields(model: type, loc: tuple) -> list[str] | None:
    """The field names a user may write at ``loc`` (a pydantic error location) under ``model``, if a model."""
    from pydantic import BaseModel

    tp: Any = model
    for part in loc:
        tp = _unwrap(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if part not in tp.model_fields:
                return None
            tp = tp.model_fields[part].annotation
            continue
        args = typing.get_args(tp)
        origin = typing.get_origin(tp)
        if origin in (list, tuple) and args:
            tp = args[0]
        elif origin is dict and len(args) == 2:
            tp = args[1]
        else:
            return None
    tp = _unwrap(tp)
    if not (isinstance(tp, type) and issubclass(tp, BaseModel)):
        return None
    hidden = getattr(tp, "internal_fields", frozenset())
    return [name for name in tp.model_fields if name not in hidden]


def unknown_name(kind: str, name: str, known: list[str] | tuple[str, ...]) -> str:
    """``"unknown place 'welll'; did you mean 'well'? (places: ...)"``: a message for a reference to nothing,
    with the closest known name (difflib, ratio >= 0.6) and the known ones."""
    msg = f"unknown {kind} '{name}'"
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=0.6)
    if close:
        msg += f"; did you mean '{close[0]}'?"
    return msg + f" ({kind}s: {', '.join(known) if known else 'none'})"


def validate_as(model: type, data: dict, source: str | Path, error: type[InputError]):
    """``model.model_validate(data)``, with a pydantic ``ValidationError`` turned into ``error(source, field,
    message)`` for its first problem (:func:`validation_problem`): the one way every input file is checked."""
    from pydantic import ValidationError

    try:
        return model.model_validate(data)
    except ValidationError as err:
        field, msg = validation_problem(err, model)
        raise error(source, field, msg) from None


def validation_problem(err, model: type) -> tuple[str | None, str]:
    """The dotted field and a one-line message for the first problem of a pydantic ``ValidationError``.

    An unknown field is reported first (a misspelt name is usually also why a required field is missing),
    with the closest valid name (difflib, ratio >= 0.6) and the list of valid ones; a wrong value says what
    was given. When there are more problems, their number is added.
    """
    errors = sorted(err.errors(), key=lambda e: e["type"] != "extra_forbidden")
    first = errors[0]
    loc = tuple(first["loc"])
    field = ".".join(str(p) for p in loc) or None
    kind = first["type"]
    if kind == "extra_forbidden":
        msg = "unknown field"
        known = _known_fields(model, loc[:-1])
        if known:
            msg = unknown_name("field", str(loc[-1]), known)
    elif kind == "missing":
        msg = "too few items: this one is missing" if isinstance(loc[-1], int) else "required field is missing"
    else:
        msg = first["msg"].removeprefix("Value error, ")
        value = first.get("input")
        if kind != "value_error" and isinstance(value, (str, int, float, bool)) and len(repr(value)) <= 60:
            msg += f", got {value!r}"
        elif kind != "value_error" and value is None:
            msg += ", got nothing (null)"
    more = len(errors) - 1
    if more:
        msg += f" (and {more} more problem{'s' if more > 1 else ''} in this file)"
    return field, msg


class PersonaError(InputError):
    """A persona file under ``agent_personalities/`` is invalid."""

    kind = "persona"


class WorldError(InputError):
    """A world file under ``worlds/`` is invalid, or disagrees with a persona file."""

    kind = "world"


class ConfigError(InputError):
    """A config file or a ``--set KEY=VALUE`` override is invalid."""

    kind = "config"


class MemoryRecordError(SimulacraError, ValueError):
    """A memory record with a field no store can hold or score (a text that is not one, a rating outside 1..10, a
    game time that is not a finite number), raised when the record is made, before anything is written."""


class UnknownNameError(SimulacraError, KeyError):
    """A retrieval profile or memory tier asked for by a name the config or store does not have; a ``KeyError``
    too, as the methods raising it always documented. ``str()`` is the message (not ``KeyError``'s quoted repr)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class RaterError(SimulacraError):
    """The importance rater could not be reached or answered something unusable."""


class RunExistsError(SimulacraError):
    """The run folder already exists and overwriting was not asked for."""


class CheckpointError(SimulacraError):
    """A run cannot be resumed from its checkpoint (missing, malformed, inconsistent with the stores or trace,
    or its input files changed); the message says which file and why."""


class StoreUnavailable(SimulacraError):
    """The Chroma server holding the memory stores did not answer within ``memory.chroma_retry_s`` seconds
    (a run stops cleanly at its last complete tick), or cannot be reached at the start of a run."""


class RunFolderError(SimulacraError):
    """The run folder cannot be written, or its disk has less free space than ``simulation.min_free_mb``;
    raised before the first tick."""


class RunInUseError(RunFolderError):
    """Another town (in this process or another) holds the run folder for writing: two writers would interleave or
    delete each other's ticks and memories (:func:`simulacra.disk.hold_run_folder`)."""


class ScenarioError(InputError):
    """A scenario file under ``scenarios/`` is invalid, or disagrees with its world."""

    kind = "scenario"
