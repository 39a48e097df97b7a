"""simulacra: generative-agent town simulations with a three-tier memory (seed 003).

The public API (:mod:`simulacra.town`)::

    from simulacra import Town, open_run

    with Town.create("fernhollow") as town:
        town.run(hours=2)
    frames = open_run(town.run_dir).frames()

Importing this package opens no database, loads no model, reads no environment variable and changes no process-wide
setting (environment, logging, thread pools); the names below are imported when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

__all__ = ["Config", "Run", "Town", "__version__", "load_config", "make_config", "open_run"]

#: public name -> the module that defines it (imported on first use, PEP 562)
_EXPORTS = {"Town": "simulacra.town", "Run": "simulacra.town", "open_run": "simulacra.town",
            "make_config": "simulacra.town", "Config": "simulacra.config", "load_config": "simulacra.config"}

if TYPE_CHECKING:  # pragma: no cover
    from simulacra.config import Config, load_config
    from simulacra.town import Run, Town, make_config, open_run


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'simulacra' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
