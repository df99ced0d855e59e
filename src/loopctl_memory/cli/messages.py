"""What a command says in plain text: one-line messages, JSON, ``--help`` examples, questions."""

from __future__ import annotations

import json

import click


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines too) made one space."""
    return " ".join(text.split())


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 memory``, ``2 memories``: a count and its noun, singular for one."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def example(*lines: str) -> str:
    """An epilog that ends ``--help`` with example invocations, kept as written."""
    return "\b\nExample:\n" + "\n".join(f"  {line}" for line in lines)


def echo_json(value: object) -> None:
    """Print ``value`` as indented JSON on standard output, non-ASCII kept as is."""
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


def confirm(question: str) -> None:
    """Ask on stderr; stop with exit status 1 unless the answer is yes."""
    try:
        agreed = click.confirm(question, err=True)
    except click.Abort:
        click.echo(err=True)  # the question is still on its line
        raise click.ClickException(
            "no answer to the confirmation question (no terminal?): nothing was changed; "
            "pass --yes to go ahead without asking"
        ) from None
    if not agreed:
        click.echo("Aborted: nothing was changed.", err=True)
        raise click.exceptions.Exit(1)
