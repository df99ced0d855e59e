"""Stand-ins for the embedder adapters' libraries and endpoints: nothing downloaded, no network.

sentence-transformers and fastembed are replaced by fake modules in
``sys.modules`` that follow their documented APIs (the ``st_models`` and
``fe_models`` fixtures, given to the unit tests by their conftest); the HTTP
endpoint by an httpx ``MockTransport``.
"""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pytest

from loopctl_memory.embedders.http import OpenAICompatibleEmbedder

if TYPE_CHECKING:
    import httpx2 as httpx
else:
    from loopctl_memory.embedders.http import httpx  # the client library the adapter uses

DIMS = 4


def vector_of(text: str, dims: int = DIMS) -> list[float]:
    """A vector that tells texts apart: the length, then the first code points."""
    codes = [float(ord(char)) for char in text[: dims - 1]]
    return [float(len(text)), *codes, *[0.0] * (dims - 1 - len(codes))]


def rows_of(texts: list[str], prefix: str = "", dims: int = DIMS) -> np.ndarray:
    return np.array([vector_of(prefix + text, dims) for text in texts], dtype=np.float32)


def fake_module(name: str, **attributes: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    vars(module).update(attributes)
    return module


# --- sentence-transformers --------------------------------------------------------------


@dataclass
class Encode:
    sentences: list[str]
    prompt_name: str | None
    batch_size: int
    convert_to_numpy: bool


class FakeSentenceTransformer:
    """``sentence_transformers.SentenceTransformer``: the constructor, prompts, encode."""

    prompts_by_model: ClassVar[dict[str, dict[str, str]]] = {}
    made: ClassVar[list[FakeSentenceTransformer]] = []

    def __init__(self, model_name_or_path: str, device: str | None = None, **kwargs: Any):
        if model_name_or_path == "no-such-model":
            raise OSError("no-such-model is not a local folder nor a model on the Hub")
        self.model_name = model_name_or_path
        self.device = device
        self.prompts = dict(self.prompts_by_model.get(model_name_or_path, {}))
        self.calls: list[Encode] = []
        self.made.append(self)

    def get_sentence_embedding_dimension(self) -> int | None:
        return None if self.model_name == "dims-unknown" else DIMS

    def encode(
        self,
        sentences: str | list[str],
        prompt_name: str | None = None,
        batch_size: int = 32,
        convert_to_numpy: bool = True,
        **kwargs: Any,
    ) -> np.ndarray:
        assert isinstance(sentences, list)
        self.calls.append(Encode(list(sentences), prompt_name, batch_size, convert_to_numpy))
        if prompt_name is not None and prompt_name not in self.prompts:
            raise ValueError(f"Prompt name '{prompt_name}' not found in the configured prompts")
        prompt = self.prompts[prompt_name] if prompt_name is not None else ""
        dims = 3 if self.model_name == "wrong-shape" else DIMS
        return np.array([vector_of(prompt + s, dims) for s in sentences], dtype=np.float64)


@pytest.fixture
def st_models(monkeypatch: pytest.MonkeyPatch) -> list[FakeSentenceTransformer]:
    """The fake library in ``sys.modules``; the list of the models it makes, in order."""
    monkeypatch.setattr(FakeSentenceTransformer, "made", [])
    monkeypatch.setattr(
        FakeSentenceTransformer,
        "prompts_by_model",
        {
            "intfloat/e5-small-v2": {"query": "query: ", "document": "passage: "},
            "passage-model": {"query": "q: ", "passage": "p: ", "corpus": "c: "},
            "many-prompts": {"query": "q: ", "search": "s: ", "document": "d: "},
        },
    )
    module = fake_module("sentence_transformers", SentenceTransformer=FakeSentenceTransformer)
    monkeypatch.setitem(sys.modules, "sentence_transformers", module)
    return FakeSentenceTransformer.made


# --- fastembed -------------------------------------------------------------------------


class FakeTextEmbedding:
    """``fastembed.TextEmbedding``: the model list, ``embed`` and ``query_embed`` generators."""

    made: ClassVar[list[FakeTextEmbedding]] = []

    def __init__(self, model_name: str = "BAAI/bge-small-en-v1.5", **kwargs: Any):
        if model_name == "unsupported/model":
            raise ValueError(f"Model {model_name} is not supported in TextEmbedding.")
        self.model_name = model_name
        self.kwargs = kwargs
        self.dims = 3 if model_name == "custom/undescribed" else DIMS
        self.calls: list[tuple[str, list[str]]] = []
        self.made.append(self)

    @classmethod
    def list_supported_models(cls) -> list[dict[str, Any]]:
        return [
            {"model": "BAAI/bge-small-en-v1.5", "dim": DIMS, "description": "English"},
            {"model": "custom/undescribed", "dim": None, "description": "no dim"},
        ]

    def embed(
        self, documents: str | list[str], batch_size: int = 256, parallel: int | None = None
    ) -> Iterator[np.ndarray]:
        assert isinstance(documents, list)
        self.calls.append(("embed", list(documents)))
        for document in documents:
            yield np.array(vector_of(document, self.dims), dtype=np.float64)

    def query_embed(self, query: str | list[str], **kwargs: Any) -> Iterator[np.ndarray]:
        assert isinstance(query, list)
        self.calls.append(("query_embed", list(query)))
        for text in query:
            yield np.array(vector_of("query: " + text, self.dims), dtype=np.float64)


@pytest.fixture
def fe_models(monkeypatch: pytest.MonkeyPatch) -> list[FakeTextEmbedding]:
    """The fake library in ``sys.modules``; the list of the models it makes, in order."""
    monkeypatch.setattr(FakeTextEmbedding, "made", [])
    monkeypatch.setitem(
        sys.modules, "fastembed", fake_module("fastembed", TextEmbedding=FakeTextEmbedding)
    )
    return FakeTextEmbedding.made


# --- OpenAI-compatible HTTP ------------------------------------------------------------

BASE_URL = "https://embeddings.example/v1"
MODEL = "text-embedding-3-small"
KEY = "sk-test-0123456789"


class Endpoint:
    """An OpenAI ``/embeddings`` endpoint: answers each input, ``data`` in reverse order."""

    def __init__(self, answer: Callable[[dict[str, Any]], httpx.Response] | None = None):
        self.requests: list[httpx.Request] = []
        self.answer = answer

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        body = json.loads(request.content)
        if self.answer is not None:
            return self.answer(body)
        data = [
            {"object": "embedding", "index": index, "embedding": vector_of(text)}
            for index, text in enumerate(body["input"])
        ]
        return httpx.Response(200, json={"object": "list", "data": data[::-1], "model": MODEL})

    @property
    def bodies(self) -> list[Any]:
        return [json.loads(request.content) for request in self.requests]

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


def http_embedder(endpoint: Endpoint, **options: Any) -> OpenAICompatibleEmbedder:
    options.setdefault("dims", DIMS)
    return OpenAICompatibleEmbedder(
        MODEL, base_url=BASE_URL, transport=endpoint.transport(), **options
    )


def answering(status: int = 200, **response: Any) -> Callable[[dict[str, Any]], httpx.Response]:
    return lambda body: httpx.Response(status, **response)
