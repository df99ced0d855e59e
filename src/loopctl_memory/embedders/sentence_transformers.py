"""SentenceTransformerEmbedder: a local sentence-transformers model as an Embedder."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from loopctl_memory.embedders.downloads import load
from loopctl_memory.embedders.extras import import_extra
from loopctl_memory.embedding import float32_rows
from loopctl_memory.errors import InvalidArgumentError

QUERY_PROMPTS = ("query",)
"""The prompt a query gets by default: the first of these the model defines."""

DOCUMENT_PROMPTS = ("document", "passage", "corpus")
"""The prompt a document gets by default: the first of these the model defines.

The names sentence-transformers' own ``encode_document`` looks for, in its order.
"""


class SentenceTransformerEmbedder:
    """A ``sentence_transformers.SentenceTransformer`` model, run in the calling thread.

    Its methods are plain (blocking) functions: the store calls them in a
    worker thread. sentence-transformers is imported when the embedder is
    made, not before (``pip install 'loopctl-memory[sentence-transformers]'``).

    Asymmetric models (E5, BGE, Nomic...) prompt queries and documents
    differently: when the model's ``prompts`` define ``"query"``, queries are
    encoded with it, and documents with the first of ``"document"``,
    ``"passage"``, ``"corpus"`` it defines. Otherwise, or for a model without
    prompts, texts are encoded as they are (or with the model's
    ``default_prompt_name``, as sentence-transformers does).

    Args:
        model: A model name on the Hugging Face Hub (``"all-MiniLM-L6-v2"``) or
            a local directory; a name not yet cached is downloaded.
        device: ``"cpu"``, ``"cuda"``, ``"mps"``...; ``None`` lets
            sentence-transformers choose.
        batch_size: How many texts ``encode`` runs at once.
        query_prompt_name: The prompt for queries, overriding the default
            above; it must be one of the model's ``prompts``.
        document_prompt_name: The prompt for documents, likewise.

    Raises:
        InvalidArgumentError: ``batch_size`` is not positive, or a prompt name
            is not one of the model's.
        EmbedderError: sentence-transformers is not installed (the message names
            the extra), or the model could not be loaded.

    Example:
        >>> embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2")  # doctest: +SKIP
        >>> embedder.embed_documents(["a", "b"]).shape  # doctest: +SKIP
        (2, 384)

    """

    def __init__(
        self,
        model: str,
        *,
        device: str | None = None,
        batch_size: int = 64,
        query_prompt_name: str | None = None,
        document_prompt_name: str | None = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be a positive int, not {batch_size!r}")
        library = import_extra("sentence_transformers", "sentence-transformers")
        self._name = f"sentence-transformers:{model}"
        self._model: Any = load(
            self._name,
            lambda **given: library.SentenceTransformer(model, **given),
            {"device": device},
        )
        self._batch_size = batch_size
        prompts: dict[str, str] = dict(getattr(self._model, "prompts", None) or {})
        self._query_prompt = _prompt_name(prompts, query_prompt_name, QUERY_PROMPTS)
        self._document_prompt = _prompt_name(prompts, document_prompt_name, DOCUMENT_PROMPTS)
        dims = self._model.get_sentence_embedding_dimension()
        if dims is None:  # a model whose last module does not say: measure one vector
            dims = len(self._encode(["dims"], self._document_prompt)[0])
        self._dims = int(dims)

    @property
    def name(self) -> str:
        """``"sentence-transformers:" + model``, as given."""
        return self._name

    @property
    def dims(self) -> int:
        """The model's ``get_sentence_embedding_dimension()``."""
        return self._dims

    @property
    def query_prompt_name(self) -> str | None:
        """The prompt queries are encoded with, if any."""
        return self._query_prompt

    @property
    def document_prompt_name(self) -> str | None:
        """The prompt documents are encoded with, if any."""
        return self._document_prompt

    def embed_documents(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """One vector a text, in order: float32 of shape ``(len(texts), dims)``.

        Raises:
            EmbedderError: The model answered another shape.

        """
        if not texts:
            return np.empty((0, self._dims), dtype=np.float32)
        vectors = self._encode(list(texts), self._document_prompt)
        return float32_rows(vectors, len(texts), self._dims, self._name)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """The query's vector, float32 of shape ``(dims,)``.

        Raises:
            EmbedderError: The model answered another shape.

        """
        vectors = self._encode([text], self._query_prompt)
        return float32_rows(vectors, 1, self._dims, self._name).reshape(self._dims)

    def _encode(self, texts: list[str], prompt_name: str | None) -> Any:
        return self._model.encode(
            texts, prompt_name=prompt_name, batch_size=self._batch_size, convert_to_numpy=True
        )

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self._name!r}, dims={self._dims})"


def _prompt_name(
    prompts: dict[str, str], chosen: str | None, defaults: tuple[str, ...]
) -> str | None:
    if chosen is not None:
        if chosen not in prompts:
            raise InvalidArgumentError(
                f"prompt {chosen!r} is not one of the model's prompts {sorted(prompts)}"
            )
        return chosen
    return next((name for name in defaults if name in prompts), None)
