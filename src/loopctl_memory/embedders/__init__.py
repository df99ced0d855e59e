"""Embedders: the adapters that turn texts into vectors for a store ranked by meaning.

An embedder is any object that satisfies :class:`loopctl_memory.Embedder`: a
``name`` (recorded with the store's vectors), ``dims``, and two methods,
``embed_documents`` and ``embed_query``, so that asymmetric models can prompt
the two differently. This package holds ready adapters, each behind an extra
so that the library itself needs none of their dependencies:

* :class:`SentenceTransformerEmbedder`, a local model of sentence-transformers
  (``pip install 'loopctl-memory[sentence-transformers]'``);
* :class:`FastEmbedEmbedder`, a local ONNX model of fastembed
  (``pip install 'loopctl-memory[fastembed]'``);
* :class:`OpenAICompatibleEmbedder`, an OpenAI-compatible ``/embeddings``
  endpoint, asynchronous (OpenAI, Ollama, vLLM, LiteLLM...; the ``http`` extra,
  or the ``httpx2`` that the MCP SDK already installs).

``pip install 'loopctl-memory[embedders]'`` installs all three. Each adapter
imports its library only when it is used, and says which extra to install
when the library is missing. :func:`embedder_from_spec` builds one from a
``"provider:model"`` string, as a command line or a configuration file gives it.

Example:
    >>> from loopctl_memory.embedders import embedder_from_spec
    >>> embedder = embedder_from_spec("sentence-transformers:all-MiniLM-L6-v2")  # doctest: +SKIP
    >>> embedder.dims  # doctest: +SKIP
    384

"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

from loopctl_memory.embedding import check_embedder, float32_rows
from loopctl_memory.errors import EmbedderError, InvalidArgumentError
from loopctl_memory.protocol import Embedder

if TYPE_CHECKING:
    from loopctl_memory.embedders.fastembed import FastEmbedEmbedder
    from loopctl_memory.embedders.http import OpenAICompatibleEmbedder
    from loopctl_memory.embedders.sentence_transformers import SentenceTransformerEmbedder

__all__ = [
    "FastEmbedEmbedder",
    "OpenAICompatibleEmbedder",
    "SentenceTransformerEmbedder",
    "embedder_from_spec",
    "float32_rows",
]

OPENAI_BASE_URL = "https://api.openai.com/v1"
"""Where ``"openai:<model>"`` sends its requests unless ``base_url`` or ``OPENAI_BASE_URL`` says."""

OLLAMA_BASE_URL = "http://localhost:11434/v1"
"""Where ``"ollama:<model>"`` sends its requests unless ``base_url`` says (Ollama's OpenAI API)."""

PROVIDERS = ("fastembed", "ollama", "openai", "python", "sentence-transformers")
"""The providers :func:`embedder_from_spec` knows, as a spec names them."""

_LAZY = {
    "FastEmbedEmbedder": "loopctl_memory.embedders.fastembed",
    "OpenAICompatibleEmbedder": "loopctl_memory.embedders.http",
    "SentenceTransformerEmbedder": "loopctl_memory.embedders.sentence_transformers",
}


def embedder_from_spec(spec: str, **options: Any) -> Embedder:
    """Build the embedder a ``"provider:model"`` spec names.

    Args:
        spec: ``"sentence-transformers:<model>"``, ``"fastembed:<model>"``,
            ``"openai:<model>"``, ``"ollama:<model>"``, or ``"python:<module>:<name>"``
            (your own: ``name`` in the importable ``module``, an embedder or a
            callable that returns one, called with ``options``). The model is
            everything after the first colon (``"ollama:nomic-embed-text:latest"`` works).
        **options: Keyword arguments of the adapter's constructor. For
            ``openai``, ``base_url`` defaults to ``$OPENAI_BASE_URL``, else
            :data:`OPENAI_BASE_URL`, and ``api_key`` to ``$OPENAI_API_KEY``. For
            ``ollama``, ``base_url`` defaults to :data:`OLLAMA_BASE_URL` and no
            key is sent unless ``api_key`` is given.

    Returns:
        The adapter, named ``spec`` (``"openai:text-embedding-3-small"``); an
        ``openai`` or ``ollama`` one takes a ``name`` option instead, if given.

    Raises:
        InvalidArgumentError: The spec is not ``provider:model`` or names an
            unknown provider.
        EmbedderError: The provider's library is not installed (the message
            names the extra to install), or the model could not be loaded.

    """
    provider, _, model = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    if provider not in PROVIDERS or not model:
        raise InvalidArgumentError(
            f"embedder spec must be PROVIDER:MODEL with PROVIDER one of "
            f"{', '.join(PROVIDERS)}, not {spec!r}"
        )
    if provider == "python":
        return _python_embedder(spec, model, options)
    # Imported here, not above: a spec loads only its own adapter (and the HTTP one its client).
    if provider == "sentence-transformers":
        from loopctl_memory.embedders.sentence_transformers import (  # noqa: PLC0415
            SentenceTransformerEmbedder,
        )

        return SentenceTransformerEmbedder(model, **options)
    if provider == "fastembed":
        from loopctl_memory.embedders.fastembed import FastEmbedEmbedder  # noqa: PLC0415

        return FastEmbedEmbedder(model, **options)
    from loopctl_memory.embedders.http import OpenAICompatibleEmbedder  # noqa: PLC0415

    if provider == "openai":
        options.setdefault("base_url", os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL)
        options.setdefault("api_key", os.environ.get("OPENAI_API_KEY") or None)
    else:
        options.setdefault("base_url", OLLAMA_BASE_URL)
    options.setdefault("name", f"{provider}:{model}")
    return OpenAICompatibleEmbedder(model, **options)


def _python_embedder(spec: str, path: str, options: dict[str, Any]) -> Embedder:
    """The embedder ``"python:<module>:<name>"`` names: ``name``, or what calling it returns."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise InvalidArgumentError(f"a python embedder spec is python:MODULE:NAME, not {spec!r}")
    try:
        found = getattr(_imported(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise EmbedderError(
            f"{spec}: cannot import {attribute} from {module_name} (looked in sys.path and the"
            f" current directory, {os.getcwd()}): {exc}"
        ) from exc
    if isinstance(found, type) or not isinstance(found, Embedder):  # a class, or a factory
        if not callable(found):
            raise EmbedderError(f"{spec}: {attribute} is neither an embedder nor makes one")
        try:
            found = found(**options)
        except Exception as exc:
            raise EmbedderError(f"{spec}: making the embedder failed: {exc}") from exc
    return check_embedder(found)


def _imported(module_name: str) -> ModuleType:
    """``module_name``, from ``sys.path`` or else the current directory (then added to it).

    ``python -m`` and ``python script.py`` search the current directory or the
    script's; a console script (``loopctl-memory``) does not. A module beside the
    user is what ``python:my_embedder:Embedder`` means, so it is searched last.
    """
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        here = os.getcwd()
        top = module_name.partition(".")[0]
        if exc.name != top or here in sys.path or "" in sys.path:
            raise
        sys.path.append(here)
        return importlib.import_module(module_name)


def __getattr__(name: str) -> Any:
    # An adapter's module is loaded on first use: the HTTP one needs its client library.
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
