"""MkDocs hook: the reference tables, generated at build time from the code itself.

A page asks for a generated part with an HTML comment on a line of its own:

* ``<!-- simulacra:config -->``: every section of :class:`simulacra.config.Config` and every field with its type,
  default and description (and the models nested in a section, such as the retrieval profiles);
* ``<!-- simulacra:cli -->``: every subcommand of ``simulacra.cli.build_parser()`` with its usage, arguments and
  help (``simulacra rater``'s options come from ``rater_server.cli.build_parser()``, which it runs);
* ``<!-- simulacra:fields dotted.path.Model -->``: the field table of one pydantic model (world and persona files);
* ``<!-- simulacra:viewer-controls -->``: the replay viewer's keys and mouse actions (its help overlay's list).

The models and parsers are imported, not copied, so the pages cannot drift from the code. The hook also keeps
``<name>`` placeholders in the pages' prose visible (:func:`on_page_markdown`). A field with neither a
``description`` nor an entry in its model's ``Attributes:`` docstring section is reported as a warning (an error
under ``mkdocs build --strict``); an unknown marker or model stops the build.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import logging
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

import annotated_types
from mkdocs.exceptions import PluginError
from pydantic import BaseModel
from pydantic.fields import FieldInfo

sys.path.insert(0, str(Path(__file__).parent))
from griffe_sphinx_roles import escape_placeholders, markdown  # noqa: E402  (this folder, not a package)

log = logging.getLogger("mkdocs.plugins.simulacra_reference")

MARKER = re.compile(r"^<!--\s*simulacra:([\w-]+)(?:[ \t]+([^\s>]+))?\s*-->[ \t]*$", re.M)
#: subcommands that hand their arguments to another program's parser (``simulacra rater`` runs ``rater_server``)
DELEGATED = {"rater": "rater_server.cli"}
USAGE_WIDTH = 100


# --------------------------------------------------------------------------- the hook
def on_page_markdown(markdown_text: str, page: Any, config: Any, files: Any) -> str:
    """Replace each ``<!-- simulacra:... -->`` marker of a page by what it asks for.

    Before that, a ``<name>`` placeholder in a page's prose (``database/<run>``) is escaped, so that Markdown shows
    it instead of taking it for an HTML tag (the pages hold no HTML of their own).
    """

    def expand(match: re.Match) -> str:
        kind, arg = match.group(1), match.group(2)
        try:
            if kind == "config" and arg is None:
                return config_reference()
            if kind == "cli" and arg is None:
                return cli_reference()
            if kind == "fields" and arg is not None:
                return model_table(load_object(arg), where=arg)
            if kind == "viewer-controls" and arg is None:
                return viewer_controls()
        except PluginError:
            raise
        except Exception as err:  # an import or attribute error names the page and the marker
            raise PluginError(f"{page.file.src_uri}: {match.group(0)}: {type(err).__name__}: {err}") from err
        raise PluginError(f"{page.file.src_uri}: unknown marker {match.group(0)} (known: simulacra:config, "
                          "simulacra:cli, simulacra:fields <dotted.path.Model>, simulacra:viewer-controls)")

    return MARKER.sub(expand, escape_placeholders(markdown_text))


def viewer_controls() -> str:
    """The viewer's keys and mouse actions (:data:`simulacra.viewer.layout.HELP_LINES`, what its help overlay shows)
    as a table."""
    from simulacra.viewer.layout import HELP_LINES

    rows = [f"| {_cell(key)} | {_cell(what)} |" for key, what in HELP_LINES]
    return "\n".join(["| key or mouse | what it does |", "|---|---|", *rows]) + "\n"


def load_object(dotted: str) -> Any:
    """The object at ``dotted`` (``package.module.Name``)."""
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


# --------------------------------------------------------------------------- docstrings as Markdown
def doc_markdown(text: str | None, owner: Any) -> str:
    """A docstring (or description) as Markdown: dedented, Sphinx roles resolved in ``owner``'s module."""
    if not text:
        return ""
    module = sys.modules.get(getattr(owner, "__module__", ""), None)

    def resolve(name: str) -> str:
        first, _, rest = name.partition(".")
        if first in ("simulacra", "rater_server"):
            return name
        obj = getattr(owner, first, None) if inspect.isclass(owner) else None
        if obj is not None:
            return f"{owner.__module__}.{owner.__qualname__}.{name}"
        obj = getattr(module, first)
        base = obj.__name__ if inspect.ismodule(obj) else f"{obj.__module__}.{obj.__qualname__}"
        return f"{base}.{rest}" if rest else base

    return markdown(inspect.cleandoc(text), resolve).strip()


def attribute_docs(model: type) -> dict[str, str]:
    """The ``Attributes:`` section of a class docstring (Google style), by attribute name."""
    import griffe

    doc = inspect.getdoc(model) if model.__doc__ else None
    if not doc:
        return {}
    out = {}
    for section in griffe.Docstring(doc).parse("google", warnings=False):
        if section.kind is griffe.DocstringSectionKind.attributes:
            out.update({a.name: a.description for a in section.value})
    return out


def summary_and_body(model: type) -> str:
    """A model's docstring without its ``Attributes:`` section (the table shows it)."""
    doc = inspect.getdoc(model) if model.__doc__ else ""
    return re.split(r"(?m)^Attributes:\s*$", doc or "", maxsplit=1)[0].strip()


# --------------------------------------------------------------------------- pydantic models
def _constraints(metadata: list[Any]) -> str:
    lo = hi = None
    lo_open = hi_open = False
    items = None
    for m in metadata:
        if isinstance(m, annotated_types.Ge):
            lo = m.ge
        elif isinstance(m, annotated_types.Gt):
            lo, lo_open = m.gt, True
        elif isinstance(m, annotated_types.Le):
            hi = m.le
        elif isinstance(m, annotated_types.Lt):
            hi, hi_open = m.lt, True
        elif isinstance(m, annotated_types.MinLen) and m.min_length:
            items = m.min_length
    parts = []
    if lo is not None and hi is not None:
        parts.append(f"{'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}")
    elif lo is not None:
        parts.append(f"{'>' if lo_open else '≥'} {lo}")
    elif hi is not None:
        parts.append(f"{'<' if hi_open else '≤'} {hi}")
    if items:
        parts.append(f"at least {items} {'entry' if items == 1 else 'entries'}")
    return ", ".join(parts)


def type_text(annotation: Any, models: list[type]) -> str:
    """A field's type in words, as a YAML or JSON author reads it; nested models are linked and collected."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        base = type_text(args[0], models)
        non_empty = any(getattr(m, "min_length", None) for m in args[1:])
        return f"non-empty {base}" if non_empty and base == "`str`" else base
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{json.dumps(a)}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        kinds = [type_text(a, models) for a in args if a is not type(None)]
        return " or ".join(kinds) + (" or `null`" if type(None) in args else "")
    if origin in (list, tuple, set, frozenset) and args:
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):  # fixed length: [x, y]
            items = [type_text(a, models) for a in args]
            return f"list of {len(items)} {items[0]}" if len(set(items)) == 1 else "list of " + ", ".join(items)
        item = type_text(args[0], models)
        return f"list, each {item}" if item.startswith("one of") else f"list of {item}"
    if origin is dict and args:
        return f"mapping of {type_text(args[0], models)} to {type_text(args[1], models)}"
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        if annotation not in models:
            models.append(annotation)
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    if annotation is type(None):
        return "`null`"
    return f"`{getattr(annotation, '__name__', str(annotation))}`"


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def default_text(field: FieldInfo) -> str:
    """The default as it would be written in the file (JSON form), or *required*."""
    if field.is_required():
        return "*required*"
    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel) and type(value).model_fields:
        return "*the section's defaults*"
    text = json.dumps(_plain(value), ensure_ascii=False)
    return f"`{text}`"


def plain_text(text: str) -> str:
    """A ``Field(description=...)`` (plain text, not Markdown) escaped for Markdown: ``a ** b`` stays a power."""
    return re.sub(r"([\\`*_\[\]])", r"\\\1", text).replace("<", "&lt;")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def model_table(model: type, where: str) -> str:
    """The Markdown table of a pydantic model's fields: name, type, default, description.

    Fields a user does not write (the model's ``internal_fields``) are left out. Models nested in the fields are
    linked by name (``#<name in lower case>``); the page provides the anchors.
    """
    if not (inspect.isclass(model) and issubclass(model, BaseModel)):
        raise PluginError(f"{where} is not a pydantic model")
    internal = getattr(model, "internal_fields", frozenset())
    attributes = attribute_docs(model)
    rows = ["| Field | Type | Default | Description |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        if name in internal:
            continue
        models: list[type] = []
        kind = type_text(field.annotation, models)
        if kind == "`str`" and any(getattr(m, "min_length", None) for m in field.metadata):  # NonEmpty, unwrapped
            kind = "non-empty `str`"
        limits = _constraints(field.metadata)
        if limits:
            kind = f"{kind}, {limits}"
        description = plain_text(field.description) if field.description else attributes.get(name, "")
        if not description:
            log.warning("%s.%s has no description: give it Field(description=...) or an entry in the "
                        "Attributes: section of %s's docstring", model.__name__, name, model.__name__)
        rows.append(f"| `{name}` | {_cell(kind)} | {_cell(default_text(field))} | "
                    f"{_cell(doc_markdown(description, model))} |")
    return "\n".join(rows) + "\n"


def nested_models(of: type | FieldInfo) -> list[type]:
    """The pydantic models named in the type of a field, or of a model's fields (in field order)."""
    found: list[type] = []
    for field in of.model_fields.values() if inspect.isclass(of) else [of]:
        type_text(field.annotation, found)
    return found


def config_reference() -> str:
    """Every section of :class:`simulacra.config.Config`, with its fields and nested models."""
    from simulacra.config import Config

    out = []
    done: set[type] = set()
    for section, field in Config.model_fields.items():
        model = field.annotation
        out.append(f"## `{section}` {{#{section}}}\n")
        out.append(doc_markdown(summary_and_body(model), model) + "\n")
        out.append(f"Class: `{model.__module__}.{model.__name__}`.\n")
        out.append(model_table(model, where=f"Config.{section}"))
        for nested in nested_models(model):
            if nested in done:
                continue
            done.add(nested)
            users = [n for n, f in model.model_fields.items() if nested in nested_models(f)]
            out.append(f"### {nested.__name__} {{#{nested.__name__.lower()}}}\n")
            out.append(f"The entries of `{section}.{'`, `'.join(users)}`. " + doc_markdown(summary_and_body(nested),
                                                                                          nested) + "\n")
            out.append(model_table(nested, where=nested.__name__))
    return "\n".join(out)


# --------------------------------------------------------------------------- argparse
def _subcommands(parser: argparse.ArgumentParser) -> tuple[dict[str, argparse.ArgumentParser], dict[str, str]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return dict(action.choices), helps
    return {}, {}


def _expand_help(action: argparse.Action, prog: str) -> str:
    """``action.help`` with its ``%(default)s``-style fields filled in, as argparse's help would show it."""
    if not action.help:
        return ""
    params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
    params["prog"] = prog
    for k, v in list(params.items()):
        if hasattr(v, "__name__"):
            params[k] = v.__name__
    if params.get("choices") is not None:
        params["choices"] = ", ".join(map(str, params["choices"]))
    return action.help % params


def _argument(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}{' ...' if action.nargs in ('+', '*') else ''}`"
    takes = action.nargs != 0
    choices = None if action.choices is None else "{" + ",".join(map(str, action.choices)) + "}"
    metavar = action.metavar or choices or action.dest.upper()
    if action.nargs in ("+", "*"):
        metavar += " ..."
    return ", ".join(f"`{o} {metavar}`" if takes else f"`{o}`" for o in action.option_strings)


def arguments_table(parser: argparse.ArgumentParser) -> str:
    """The Markdown table of a parser's arguments (positional first, as argparse lists them)."""
    rows = ["| Argument | Help |", "|---|---|"]
    actions = [a for a in parser._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
    actions.sort(key=lambda a: bool(a.option_strings))
    for action in actions:
        text = plain_text(_expand_help(action, parser.prog))
        extra = []
        if action.required and action.option_strings:
            extra.append("required")
        if not action.option_strings and action.nargs == "?":
            extra.append(f"optional, default `{action.default}`" if action.default is not None else "optional")
        if action.choices is not None and action.metavar is not None:  # else the choices show as {a,b}
            extra.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
        if isinstance(action, argparse._AppendAction) and "repeat" not in text:
            extra.append("repeatable")
        if extra:
            text = f"{text} ({'; '.join(extra)})" if text else "; ".join(extra)
        rows.append(f"| {_cell(_argument(action))} | {_cell(text)} |")
    return "\n".join(rows) + "\n" if len(rows) > 2 else "No arguments.\n"


def usage(parser: argparse.ArgumentParser) -> str:
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=USAGE_WIDTH)
    return parser.format_usage().strip()


def cli_reference() -> str:
    """Every subcommand of ``simulacra`` (``simulacra.cli.build_parser()``) with usage, arguments and help."""
    from simulacra.cli import build_parser

    parser = build_parser()
    commands, helps = _subcommands(parser)
    if not commands:
        raise PluginError("simulacra.cli.build_parser() has no subcommands")
    out = ["## `simulacra` {#simulacra}\n", plain_text(parser.description or "") + "\n",
           f"```text\n{usage(parser)}\n```\n", "Options before the subcommand:\n", arguments_table(parser),
           "Subcommands: " + ", ".join(f"[`{name}`](#{name})" for name in commands) + ".\n"]
    for name, sub in commands.items():
        delegate = DELEGATED.get(name)
        shown = importlib.import_module(delegate).build_parser() if delegate else sub
        out.append(f"## `simulacra {name}` {{#{name}}}\n")
        if helps.get(name):
            out.append(f"*{_cell(plain_text(helps[name]))}.*\n")
        description = sub.description or shown.description
        if description:
            out.append(_cell(plain_text(description)) + "\n")
        out.append(f"```text\n{usage(shown)}\n```\n")
        out.append(arguments_table(shown))
    return "\n".join(out)
