"""The ``index`` of a LangGraph store as this store's embedder.

``index["embed"]`` is what LangGraph accepts there (a LangChain ``Embeddings``,
a function of a list of texts, sync or async, or a ``"provider:model"``
string), or an :class:`~loopctl_memory.Embedder` of this library, used as it
is. The store records vectors by the embedder's name and refuses another's:
``index["name"]`` names a LangGraph embedder (default: the string given, or
the function's or the class's qualified name).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import ensure_embeddings

from loopctl_memory.errors import InvalidArgumentError
from loopctl_memory.protocol import Embedder


@dataclass(frozen=True, slots=True)
class LangChainEmbedder:
    """An :class:`~loopctl_memory.Embedder` over LangChain ``Embeddings`` (their async calls)."""

    embeddings: Any
    name: str
    """The name the store records its vectors by."""
    dims: int
    """How many numbers each vector has (``index["dims"]``)."""

    async def embed_documents(self, texts: list[str]) -> Any:
        """The vectors of ``texts``, by the embeddings' ``aembed_documents``."""
        return await self.embeddings.aembed_documents(texts)

    async def embed_query(self, text: str) -> Any:
        """The vector of a query, by the embeddings' ``aembed_query``."""
        return await self.embeddings.aembed_query(text)


def _default_name(embed: object) -> str:
    if isinstance(embed, str):
        return embed
    named = embed if callable(embed) and not hasattr(embed, "embed_documents") else type(embed)
    module = getattr(named, "__module__", "?")
    return f"langchain:{module}.{getattr(named, '__qualname__', type(named).__name__)}"


def embedder_of(index: Mapping[str, Any] | None) -> Embedder | None:
    """The embedder ``index`` configures, or None without one.

    Raises:
        InvalidArgumentError: ``index`` has no ``embed`` or no positive int ``dims``.

    """
    if index is None:
        return None
    embed = index.get("embed")
    dims = index.get("dims")
    if embed is None:
        raise InvalidArgumentError("index needs 'embed': the embeddings or function to use")
    if isinstance(embed, Embedder) and not isinstance(embed, str):
        return embed
    if type(dims) is not int or dims < 1:
        raise InvalidArgumentError(f"index needs 'dims', a positive int, not {dims!r}")
    name = index.get("name") or _default_name(embed)
    return LangChainEmbedder(ensure_embeddings(embed), str(name), dims)
