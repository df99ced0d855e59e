"""A griffe extension for the API reference: the docstrings' reST markup, read as Markdown.

The docstrings are Google style with a few reST habits that Markdown does not
know. This extension rewrites them in every docstring of the package after it is
loaded, so that the source stays as it is:

- a role (``:class:`~loopctl_memory.SqlMemoryStore```, ``:meth:`close```) becomes
  a code span, linked to the object's entry where the reference documents it;
- a paragraph ending in ``::`` ends in ``:``, and the indented block below it is
  fenced as code, as is the block of a ``.. code-block:: python`` directive;
- a run of doctest lines (``>>>``) outside a code block becomes a ``pycon`` block.

mkdocs.yml loads it by path (``extensions: [docs/griffe_rest.py]``).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|data|mod|obj|exc|const):`(?P<target>[^`]+)`")
DIRECTIVE = re.compile(r"^\s*\.\. code-block::\s*(?P<language>\w*)\s*$")
SECTION = re.compile(r"^\s*[A-Z]\w*( \w+)?:\s*$")  # a Google section's title: "Example:"
DOCTEST_FLAG = re.compile(r"\s*# doctest:.*$")


class RestToMarkdown(griffe.Extension):
    """Rewrite the reST of every docstring of a loaded package as Markdown."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        """Rewrite each docstring once the whole package is loaded (targets resolve)."""
        for obj in _walk(pkg, set()):
            if obj.docstring is not None:
                obj.docstring.value = _markdown(obj.docstring.value, obj, loader)


def _walk(obj: griffe.Object, seen: set[str]) -> list[griffe.Object]:
    if obj.path in seen:
        return []
    seen.add(obj.path)
    found = [obj]
    for member in obj.members.values():
        if not member.is_alias:
            found.extend(_walk(member, seen))  # type: ignore[arg-type]
    return found


def _markdown(text: str, obj: griffe.Object, loader: griffe.GriffeLoader) -> str:
    text = ROLE.sub(lambda match: _role(match["target"], obj, loader), text)
    return "\n".join(_blocks(text.split("\n")))


def _role(target: str, obj: griffe.Object, loader: griffe.GriffeLoader) -> str:
    shown = target
    if target.startswith("~"):
        target = target[1:]
        shown = target.rsplit(".", 1)[-1]
    target = target.removesuffix("()")
    path = _resolve(target, obj, loader)
    code = f"<code>{shown}</code>"
    if path is None:
        return f"`{shown}`"
    return f'<autoref identifier="{path}" optional>{code}</autoref>'


def _resolve(target: str, obj: griffe.Object, loader: griffe.GriffeLoader) -> str | None:
    """The full path of ``target`` as seen from ``obj``, if the loader knows it."""
    candidates = [target]
    head, _, rest = target.partition(".")
    try:
        resolved = obj.resolve(head)  # a member, an import, or the same up the parents
    except griffe.NameResolutionError:
        pass
    else:
        candidates.insert(0, f"{resolved}.{rest}" if rest else resolved)
    for candidate in candidates:
        try:
            loader.modules_collection[candidate]
        except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            continue
        return candidate
    return None


def _blocks(lines: list[str]) -> list[str]:
    out: list[str] = []
    fenced = False
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped.startswith("```"):
            fenced = not fenced
        if fenced:
            out.append(line)
            index += 1
            continue
        if directive := DIRECTIVE.match(line):
            index = _literal(lines, index + 1, indent, directive["language"] or "text", out)
            continue
        if stripped.startswith(">>>"):
            block = []
            while index < len(lines) and lines[index].strip():
                block.append(DOCTEST_FLAG.sub("", lines[index][indent:]))
                index += 1
            _fence(out, indent, "pycon", block)
            continue
        if stripped.endswith("::"):
            if stripped != "::":
                out.append(line[:-1])
            index = _literal(lines, index + 1, indent, "text", out)
            continue
        out.append(line)
        index += 1
    return out


def _literal(lines: list[str], index: int, indent: int, language: str, out: list[str]) -> int:
    """Fence the block indented below line ``index - 1``; return the index after it."""
    block: list[str] = []
    inner: int | None = None
    while index < len(lines):
        line = lines[index]
        if line.strip():
            here = len(line) - len(line.lstrip())
            if here <= indent:
                break
            inner = here if inner is None else min(inner, here)
        block.append(line)
        index += 1
    while block and not block[-1].strip():
        block.pop()
    while block and not block[0].strip():
        block.pop(0)
    _fence(out, indent, language, [line[inner or 0 :] for line in block])
    if index < len(lines):
        out.append("")
    return index


def _fence(out: list[str], indent: int, language: str, block: list[str]) -> None:
    if out and out[-1].strip() and not SECTION.match(out[-1]):
        out.append("")  # a paragraph above; not a section's title ("Example:")
    pad = " " * indent
    out.extend([f"{pad}```{language}", *(f"{pad}{code}" if code else "" for code in block)])
    out.append(f"{pad}```")
