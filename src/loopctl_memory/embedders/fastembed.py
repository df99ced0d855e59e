"""FastEmbedEmbedder: a local fastembed (ONNX) model as an Embedder."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from loopctl_memory.embedders.downloads import load
from loopctl_memory.embedders.extras import import_extra
from loopctl_memory.embedding import float32_rows


class FastEmbedEmbedder:
    """A ``fastembed.TextEmbedding`` model, run in the calling thread.

    Its methods are plain (blocking) functions: the store calls them in a
    worker thread. fastembed is imported when the embedder is made, not
    before (``pip install 'loopctl-memory[fastembed]'``). Documents go
    through ``TextEmbedding.embed`` and queries through ``query_embed``, which
    adds the query prefix of the models that have one.

    ``dims`` is the ``dim`` of the model's description in
    ``TextEmbedding.list_supported_models()`` (custom models added with
    ``add_custom_model`` are listed too), found without running the model;
    only a model that the list does not describe is measured, by embedding
    one text when the embedder is made.

    Args:
        model: A model fastembed supports (``"BAAI/bge-small-en-v1.5"``); one
            not yet cached is downloaded.
        **kwargs: Passed to ``TextEmbedding`` (``cache_dir``, ``threads``,
            ``providers``, ``lazy_load``...).

    Raises:
        EmbedderError: fastembed is not installed (the message names the
            extra), or the model could not be loaded.

    Example:
        >>> embedder = FastEmbedEmbedder("BAAI/bge-small-en-v1.5")  # doctest: +SKIP
        >>> embedder.embed_query("where are the logs").shape  # doctest: +SKIP
        (384,)

    """

    def __init__(self, model: str, **kwargs: Any) -> None:
        library = import_extra("fastembed", "fastembed")
        self._name = f"fastembed:{model}"
        self._model: Any = load(
            self._name, lambda **given: library.TextEmbedding(model_name=model, **given), kwargs
        )
        dims = _described_dims(library.TextEmbedding, model)
        if dims is None:
            dims = len(next(iter(self._model.embed(["dims"]))))
        self._dims = dims

    @property
    def name(self) -> str:
        """``"fastembed:" + model``, as given."""
        return self._name

    @property
    def dims(self) -> int:
        """The model's dimension, from its description (see the class)."""
        return self._dims

    def embed_documents(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """One vector a text, in order: float32 of shape ``(len(texts), dims)``.

        Raises:
            EmbedderError: The model answered another shape.

        """
        if not texts:
            return np.empty((0, self._dims), dtype=np.float32)
        vectors = list(self._model.embed(list(texts)))
        return float32_rows(vectors, len(texts), self._dims, self._name)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """The query's vector, float32 of shape ``(dims,)``.

        Raises:
            EmbedderError: The model answered another shape.

        """
        # A list, not the str: before 0.6, fastembed's default query_embed embedded a str
        # twice (once as a str, once as the iterable it also is).
        vectors = list(self._model.query_embed([text]))
        return float32_rows(vectors, 1, self._dims, self._name).reshape(self._dims)

    def __repr__(self) -> str:
        return f"FastEmbedEmbedder({self._name!r}, dims={self._dims})"


def _described_dims(text_embedding: Any, model: str) -> int | None:
    # fastembed matches model names without regard to case; so does this.
    for description in text_embedding.list_supported_models():
        if str(description.get("model", "")).lower() == model.lower():
            dim = description.get("dim")
            return int(dim) if dim else None
    return None
