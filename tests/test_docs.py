"""The documentation site (mkdocs.yml, docs/): it builds with warnings as errors, and its generated reference pages
hold what the real config models and CLI parser define (a generator that silently produced nothing fails); the
examples of docs/formats.md are valid files."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from simulacra.cli import build_parser
from simulacra.config import Config
from simulacra.persona import Persona
from simulacra.world import check_world
from simulacra.world.model import World
from tests.conftest import ROOT

DOCS_PACKAGES = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")


def _missing_docs_packages() -> list[str]:
    out = []
    for name in DOCS_PACKAGES:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # the parent package is missing
            found = False
        if not found:
            out.append(name)
    return out


def _subcommands() -> dict:
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return dict(action.choices)


def test_site_builds_strictly_with_generated_references(tmp_path):
    missing = _missing_docs_packages()
    if missing:
        pytest.skip(f"the docs packages are not installed ({', '.join(missing)}): pip install mkdocs-material "
                    "mkdocstrings-python")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"

    config_page = (site / "reference" / "config" / "index.html").read_text(encoding="utf-8")
    for section, field in Config.model_fields.items():
        assert f'id="{section}"' in config_page, f"config reference: no section {section}"
        for name in field.annotation.model_fields:
            assert f"<code>{name}</code>" in config_page, f"config reference: no field {section}.{name}"

    cli_page = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    for command, sub in _subcommands().items():
        assert f'id="{command}"' in cli_page, f"CLI reference: no subcommand {command}"
        for action in sub._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert re.search(f"<code>{re.escape(option)}[ <]", cli_page), \
                        f"CLI reference: simulacra {command} {option} missing"

    formats_page = (site / "formats" / "index.html").read_text(encoding="utf-8")
    for model in (World, Persona):
        for name in set(model.model_fields) - model.internal_fields:
            assert f"<code>{name}</code>" in formats_page, f"formats: no field {model.__name__}.{name}"

    import html

    from simulacra.viewer.layout import HELP_LINES

    viewer_page = html.unescape((site / "viewer" / "index.html").read_text(encoding="utf-8"))
    for key, what in HELP_LINES:  # the controls table is the help overlay's list
        assert f"<td>{key}</td>" in viewer_page and f"<td>{what}</td>" in viewer_page, f"viewer controls: {key}"

    for page in ("config", "memory", "simulation", "trace", "world", "persona", "town", "frames"):
        assert "doc-object" in (site / "api" / page / "index.html").read_text(encoding="utf-8"), \
            f"API page {page} documents nothing"


def test_format_examples_are_valid(tmp_path):
    """The world and persona examples of docs/formats.md load and pass every cross-reference check."""
    text = (ROOT / "docs" / "formats.md").read_text(encoding="utf-8")
    world_text = re.search(r"```yaml\n(.*?)```", text, re.S).group(1)
    world = yaml.safe_load(world_text)
    persona = json.loads(re.search(r"```json\n(.*?)```", text, re.S).group(1))
    (tmp_path / "worlds").mkdir()
    (tmp_path / "agent_personalities").mkdir()
    (tmp_path / "worlds" / "town.yaml").write_text(world_text, encoding="utf-8")
    for i, rid in enumerate(world["residents"]):  # the example persona, and plain copies for the other residents
        data = persona if i == 0 else {**persona, "name": f"Resident {rid}", "relationships": {}}
        (tmp_path / "agent_personalities" / f"{rid}.json").write_text(json.dumps(data), encoding="utf-8")
    loaded = check_world(tmp_path / "worlds" / "town.yaml")
    assert list(loaded.personas) == world["residents"]
