"""Errors raised by simulacra. Each names the file and the field at fault where there is one."""

from __future__ import annotations

from pathlib import Path


class SimulacraError(Exception):
    """Base class of every error simulacra raises on purpose."""


class InputError(SimulacraError):
    """A user-supplied file (persona, world, config) is missing a field or has a wrong one.

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
        self.message = message
        self.other_file = str(other_file) if other_file is not None else None
        where = self.file if field is None else f"{self.file}: field '{field}'"
        if self.other_file:
            where += f" (checked against {self.other_file})"
        super().__init__(f"{where}: {message}")


def read_yaml(path: str | Path, error: type[InputError] = InputError):
    """The YAML document in ``path`` (``None`` for an empty file).

    Raises:
        error: naming ``path``, when it cannot be read or is not valid YAML.
    """
    import yaml

    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise error(path, None, f"cannot read: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise error(path, None, f"not valid YAML: {err}") from None


class PersonaError(InputError):
    """A persona file under ``agent_personalities/`` is invalid."""

    kind = "persona"


class WorldError(InputError):
    """A world file under ``worlds/`` is invalid, or disagrees with a persona file."""

    kind = "world"


class ConfigError(InputError):
    """A config file or a ``--set KEY=VALUE`` override is invalid."""

    kind = "config"


class RaterError(SimulacraError):
    """The importance rater could not be reached or answered something unusable."""


class RunExistsError(SimulacraError):
    """The run folder already exists and overwriting was not asked for."""


class CheckpointError(SimulacraError):
    """A run cannot be resumed from its checkpoint (missing, malformed, inconsistent with the stores or trace,
    or its input files changed); the message says which file and why."""
