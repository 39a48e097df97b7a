"""Named config files (``simulacra run --preset NAME``), packaged in ``simulacra/assets/presets/``
(:mod:`simulacra.assets`).

A preset is an ordinary config file (:func:`simulacra.config.load_config`); the preset ``seed003`` reproduces
seed 003's retrieval exactly (cascade over static, short-term and long-term memory, threshold 0.35, weights
0.25 / 0.25 / 1, no static budget).
"""

from __future__ import annotations

from pathlib import Path

from simulacra import assets
from simulacra.errors import ConfigError


def available_presets() -> list[str]:
    """Names of the packaged presets, sorted."""
    return assets.available("preset")


def preset_path(name: str) -> Path:
    """The config file of the packaged preset ``name``.

    Raises:
        ConfigError: no such preset (naming it and listing the available ones).
    """
    path = assets.folder("preset") / f"{name}.yaml"
    if not name or Path(name).name != name or not path.is_file():
        known = ", ".join(available_presets()) or "none"
        raise ConfigError(assets.folder("preset"), None, f"no preset {name!r} (available: {known})")
    return path
