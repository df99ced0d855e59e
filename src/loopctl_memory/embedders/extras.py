"""What an adapter does when the library behind its extra is missing: one line naming the extra."""

from __future__ import annotations

import importlib
from types import ModuleType

from loopctl_memory.errors import EmbedderError


def missing_extra(library: str, extra: str) -> EmbedderError:
    """The error of an adapter whose library is not installed: one line naming the extra."""
    return EmbedderError(
        f"{library} is not installed: pip install 'loopctl-memory[{extra}]'"
        f" (from a checkout of loopctl-memory: pip install -e '.[{extra}]')"
    )


def import_extra(module: str, extra: str) -> ModuleType:
    """Import ``module``, the library behind ``extra``.

    Raises:
        EmbedderError: It cannot be imported; the ``ImportError`` is chained.

    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing_extra(module, extra) from exc
