"""Griffe extension: the docstrings' Sphinx roles and reST literal markers as Markdown for mkdocstrings.

simulacra's docstrings are Google style with reST inline markup: ``:func:`load_world```, ``:class:`~pkg.Name```,
``text::`` before an indented block. mkdocstrings renders docstrings as Markdown, where those show verbatim. Once
a package is loaded, every docstring's role becomes a code span that is an *optional* cross-reference (a link when
the page set documents the target, plain code otherwise, never a warning); a line ending in ``::`` ends in ``:``
(the indented block after it is a Markdown code block already); a ``<name>`` placeholder in prose is escaped so that
Markdown does not drop it as an HTML tag; and a module or class attribute documented by ``#:`` comment lines above
it gets them as its docstring. The source files are not touched.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

#: ``:role:`target```, ``:py:role:`~target```, ``:role:`title <target>```
ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|data|attr|exc|obj|const|type):`([^`]+)`")
#: a ``<`` that starts a tag-like word in prose, but not an autolink (``<https://...>``)
PLACEHOLDER = re.compile(r"<(?![A-Za-z][A-Za-z0-9+.-]*:)(?=[A-Za-z_/])")
#: a code span: a run of backticks, anything (newlines too), the same run
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)[\s\S]*?(?<!`)\1(?!`)")
LITERAL_MARKER = re.compile(r"(?m)(?<=\S)::[ \t]*$")  # ``text::``: the text, then a literal block
LITERAL_LINE = re.compile(r"(?m)^[ \t]*::[ \t]*$")  # ``::`` alone on its line: only a literal block follows


def markdown(text: str, resolve: Any = None) -> str:
    """``text`` with its Sphinx roles and literal markers turned into Markdown.

    Args:
        text: a docstring (or part of one).
        resolve: ``name -> full dotted path`` (raising on an unknown name), or ``None`` for plain code spans.
    Returns:
        The text; a role whose target resolves becomes ``<autoref identifier=... optional><code>..</code></autoref>``.
    """

    def role(match: re.Match) -> str:
        target = match.group(1).strip()
        title = None
        explicit = re.fullmatch(r"(.+?)\s*<([^>]+)>", target)
        if explicit:
            title, target = explicit.group(1), explicit.group(2)
        short = target.startswith("~")
        target = target.lstrip("~.").removesuffix("()")
        if title is None:
            title = target.rsplit(".", 1)[-1] if short else target
        identifier = None
        if resolve is not None:
            try:
                identifier = resolve(target)
            except Exception:  # an unknown name stays plain code
                identifier = None
        code = f"<code>{html.escape(title)}</code>"
        if not identifier:
            return f"`{title}`"
        return f'<autoref identifier="{html.escape(identifier)}" optional>{code}</autoref>'

    text = ROLE.sub(role, escape_placeholders(text))
    return LITERAL_MARKER.sub(":", LITERAL_LINE.sub("", text))


def escape_placeholders(text: str) -> str:
    """``<name>`` written as prose (``database/<run>``) escaped, so that Markdown does not take it for an HTML tag
    and drop it; code spans, fenced blocks and reST literal blocks (the indented lines after a line ending in
    ``::``) are left as they are, since Markdown shows those verbatim."""
    out: list[str] = []
    prose: list[str] = []  # consecutive prose lines (a code span may run over several)

    def flush() -> None:
        if prose:
            block, done, at = "\n".join(prose), [], 0
            for span in CODE_SPAN.finditer(block):
                done += [PLACEHOLDER.sub("&lt;", block[at:span.start()]), span.group(0)]
                at = span.end()
            out.append("".join(done) + PLACEHOLDER.sub("&lt;", block[at:]))
            prose.clear()

    literal_indent = None  # indentation of the line that opened a literal block
    fence = None  # the fence of the fenced block we are in
    for line in text.split("\n"):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        verbatim = True
        if fence is not None:  # inside a fenced block until its closing fence
            fence = None if stripped.startswith(fence) else fence
        elif stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
        elif literal_indent is not None and (not stripped or indent > literal_indent):
            pass
        else:
            literal_indent = indent if line.rstrip().endswith("::") else None
            verbatim = not stripped  # a blank line ends a paragraph, and any code span
        if verbatim:
            flush()
            out.append(line)
        else:
            prose.append(line)
    flush()
    return "\n".join(out)


def resolver(obj: griffe.Object) -> Any:
    """``name -> full path`` in the scope of ``obj``: dotted names from ``simulacra`` or ``rater_server`` as
    they are, others by their first part in ``obj``'s scope (its members, then its parents')."""

    def resolve(name: str) -> str:
        first, _, rest = name.partition(".")
        if first in ("simulacra", "rater_server"):
            return name
        path = obj.resolve(first)
        return f"{path}.{rest}" if rest else path

    return resolve


def doc_comment(attr: griffe.Object) -> str | None:
    """The ``#:`` comment lines right above a module or class attribute (Sphinx's attribute doc comment)."""
    try:
        lines = attr.module.lines
    except Exception:  # no source (a compiled module)
        return None
    if not attr.lineno or attr.lineno > len(lines):
        return None
    found: list[str] = []
    i = attr.lineno - 2  # the line above, 0-based
    while i >= 0 and lines[i].lstrip().startswith("#:"):
        found.append(lines[i].lstrip()[2:].removeprefix(" "))
        i -= 1
    return "\n".join(reversed(found)) or None


class SphinxRoles(griffe.Extension):
    """Rewrites the docstrings of a loaded package (see the module docstring)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        self._walk(pkg, set())

    def _walk(self, obj: griffe.Object, seen: set[str]) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        if obj.docstring is None and obj.is_attribute:
            comment = doc_comment(obj)
            if comment:
                obj.docstring = griffe.Docstring(comment, lineno=obj.lineno, parent=obj)
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value, resolver(obj))
            obj.docstring.__dict__.pop("parsed", None)  # parsed lazily; drop a cached parse of the old text
        for member in list(obj.members.values()):
            if not member.is_alias:
                self._walk(member, seen)
