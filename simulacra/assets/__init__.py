"""The towns that ship inside the package: worlds, personas, scenarios and config presets.

They are package data (found through :mod:`importlib.resources`), so an installed simulacra runs its default town
from any folder: ``simulacra run`` (the world ``fernhollow``), ``Town.create("gullhaven")``,
``simulacra evaluate fernhollow-party``, ``--preset seed003``. A git checkout has the same folders at its top level
(links into this package), and the paths the docs use there (``worlds/fernhollow.yaml``) work from any folder too.

Layout (each folder beside the others, so that a world finds its personas in ``../agent_personalities/`` and a
scenario its world in ``../worlds/``, as user files do)::

    worlds/<name>.yaml               scenarios/<name>.yaml
    agent_personalities/<id>.json    presets/<name>.yaml

One rule decides what a name given by a user means (:func:`find`): an existing file is used as it is; otherwise a
bare name (``fernhollow``) or a path whose folder is the packaged folder's name (``worlds/fernhollow.yaml``) is
looked up in the package.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

#: what each kind of packaged file is called, and the folder and suffix it lives under
KINDS: dict[str, tuple[str, str]] = {
    "world": ("worlds", ".yaml"),
    "scenario": ("scenarios", ".yaml"),
    "preset": ("presets", ".yaml"),
    "persona": ("agent_personalities", ".json"),
}


def folder(kind: str) -> Path:
    """The packaged folder of ``kind`` (a key of :data:`KINDS`): a real folder on disk (simulacra is not run from a
    zip file).

    Raises:
        KeyError: an unknown kind.
    """
    name, _ = KINDS[kind]
    return Path(str(files(__name__).joinpath(name)))


def available(kind: str) -> list[str]:
    """Names (file stems) of the packaged files of ``kind``, sorted; e.g. ``available("world")`` ->
    ``["fernhollow", "gullhaven"]``."""
    _, suffix = KINDS[kind]
    d = folder(kind)
    return sorted(p.stem for p in d.glob(f"*{suffix}")) if d.is_dir() else []


def find(given: str | Path, kind: str) -> Path:
    """The file a user means by ``given``: the path itself when it exists; else, for a bare name (``fernhollow``,
    ``fernhollow.yaml``) or a path inside a folder named like the packaged one (``worlds/fernhollow.yaml``), the
    packaged file of that name when there is one; else ``given`` unchanged (the caller reports the missing file,
    naming :func:`available` ones).

    Args:
        given: a path or a name.
        kind: ``world``, ``scenario``, ``preset`` or ``persona``.
    Returns:
        A path (not necessarily existing).
    """
    path = Path(given).expanduser()
    if path.exists():
        return path
    folder_name, suffix = KINDS[kind]
    if len(path.parts) == 1 or (len(path.parts) == 2 and path.parts[0] == folder_name):
        candidate = folder(kind) / (path.name if path.suffix == suffix else path.name + suffix)
        if candidate.is_file():
            return candidate
    return path


def describe(kind: str) -> str:
    """``"the packaged worlds are fernhollow, gullhaven"``: for an error about a file that was not found."""
    names = available(kind)
    return f"the packaged {KINDS[kind][0].replace('_', ' ')} are {', '.join(names)}" if names else \
        f"no {KINDS[kind][0]} are packaged"
