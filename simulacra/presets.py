"""Named config files shipped in the repository's ``presets/`` folder (``simulacra run --preset NAME``).

A preset is an ordinary config file (:func:`simulacra.config.load_config`); ``presets/seed003.yaml`` reproduces
seed 003's retrieval exactly (cascade over static, short-term and long-term memory, threshold 0.35, weights
0.25 / 0.25 / 1, no static budget).
"""

from __future__ import annotations

from pathlib import Path

from simulacra.errors import ConfigError

#: the repository's ``presets/`` folder (beside the ``simulacra`` package)
PRESETS_DIR = Path(__file__).resolve().parent.parent / "presets"


def available_presets(folder: str | Path = PRESETS_DIR) -> list[str]:
    """Names of the presets in ``folder`` (``<name>.yaml``), sorted; empty when the folder is missing."""
    p = Path(folder)
    return sorted(f.stem for f in p.glob("*.yaml")) if p.is_dir() else []


def preset_path(name: str, folder: str | Path = PRESETS_DIR) -> Path:
    """The config file of preset ``name``: ``<folder>/<name>.yaml``.

    Raises:
        ConfigError: no such preset (naming it and listing the available ones).
    """
    path = Path(folder) / f"{name}.yaml"
    if not name or Path(name).name != name or not path.is_file():
        known = ", ".join(available_presets(folder)) or "none"
        raise ConfigError(Path(folder), None, f"no preset {name!r} (available: {known})")
    return path
