"""The embedder adapters, against stand-ins for their libraries and endpoints.

sentence-transformers and fastembed are replaced by fake modules in
``sys.modules`` that follow their documented APIs; the HTTP endpoint by an
httpx ``MockTransport``. Nothing is downloaded and nothing touches the network.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pytest

from loopctl_memory import Embedder, EmbedderError, InvalidArgumentError, embedders
from loopctl_memory.embedders import embedder_from_spec
from loopctl_memory.embedders.fastembed import FastEmbedEmbedder
from loopctl_memory.embedders.http import OpenAICompatibleEmbedder
from loopctl_memory.embedders.sentence_transformers import SentenceTransformerEmbedder

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


def test_st_name_and_dims_come_from_the_model(st_models):
    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
    assert "sentence-transformers:all-MiniLM-L6-v2" == embedder.name
    assert DIMS == embedder.dims
    assert "all-MiniLM-L6-v2" == st_models[0].model_name
    assert "cpu" == st_models[0].device
    assert [] == st_models[0].calls  # nothing encoded to learn dims


def test_st_documents_are_float32_rows_in_order(st_models):
    texts = ["alpha", "be", "gamma ray"]
    vectors = SentenceTransformerEmbedder("all-MiniLM-L6-v2").embed_documents(texts)
    assert np.float32 == vectors.dtype
    assert (3, DIMS) == vectors.shape
    np.testing.assert_array_equal(rows_of(texts), vectors)
    assert [Encode(texts, None, 64, True)] == st_models[0].calls


def test_st_query_is_one_float32_vector(st_models):
    vector = SentenceTransformerEmbedder("all-MiniLM-L6-v2").embed_query("where")
    assert np.float32 == vector.dtype
    assert (DIMS,) == vector.shape
    np.testing.assert_array_equal(rows_of(["where"])[0], vector)


def test_st_batch_size_is_passed_to_encode(st_models):
    SentenceTransformerEmbedder("m", batch_size=8).embed_documents(["a", "b"])
    assert 8 == st_models[0].calls[0].batch_size


def test_st_no_documents_encode_nothing(st_models):
    vectors = SentenceTransformerEmbedder("m").embed_documents([])
    assert (0, DIMS) == vectors.shape
    assert np.float32 == vectors.dtype
    assert [] == st_models[0].calls


def test_st_asymmetric_model_prompts_queries_and_documents_apart(st_models):
    embedder = SentenceTransformerEmbedder("intfloat/e5-small-v2")
    documents = embedder.embed_documents(["the logs are in /var/log"])
    query = embedder.embed_query("where are the logs")
    assert ["document", "query"] == [call.prompt_name for call in st_models[0].calls]
    np.testing.assert_array_equal(rows_of(["the logs are in /var/log"], "passage: "), documents)
    np.testing.assert_array_equal(rows_of(["where are the logs"], "query: ")[0], query)
    assert ("query", "document") == (embedder.query_prompt_name, embedder.document_prompt_name)


def test_st_documents_take_the_passage_prompt_when_there_is_no_document_prompt(st_models):
    embedder = SentenceTransformerEmbedder("passage-model")
    assert ("query", "passage") == (embedder.query_prompt_name, embedder.document_prompt_name)


def test_st_a_model_without_prompts_encodes_texts_as_they_are(st_models):
    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2")
    embedder.embed_documents(["a"])
    embedder.embed_query("b")
    assert [None, None] == [call.prompt_name for call in st_models[0].calls]


def test_st_prompt_names_given_override_the_defaults(st_models):
    embedder = SentenceTransformerEmbedder(
        "many-prompts", query_prompt_name="search", document_prompt_name="query"
    )
    embedder.embed_query("x")
    embedder.embed_documents(["y"])
    assert ["search", "query"] == [call.prompt_name for call in st_models[0].calls]


def test_st_a_prompt_name_the_model_lacks_is_refused(st_models):
    with pytest.raises(InvalidArgumentError, match="'search' is not one of the model's prompts"):
        SentenceTransformerEmbedder("intfloat/e5-small-v2", query_prompt_name="search")


def test_st_dims_unknown_to_the_model_are_measured(st_models):
    embedder = SentenceTransformerEmbedder("dims-unknown")
    assert DIMS == embedder.dims
    assert 1 == len(st_models[0].calls)


def test_st_vectors_of_another_shape_are_an_embedder_error(st_models):
    embedder = SentenceTransformerEmbedder("wrong-shape")
    with pytest.raises(EmbedderError, match=r"shape \(1, 3\), not \(1, 4\)"):
        embedder.embed_documents(["a"])


def test_st_a_model_that_cannot_load_is_an_embedder_error(st_models):
    with pytest.raises(EmbedderError, match="no-such-model could not be loaded") as caught:
        SentenceTransformerEmbedder("no-such-model")
    assert isinstance(caught.value.__cause__, OSError)


@pytest.mark.parametrize("batch_size", [0, -1, 2.5, True])
def test_st_batch_size_must_be_a_positive_int(st_models, batch_size):
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        SentenceTransformerEmbedder("m", batch_size=batch_size)
    assert [] == st_models  # checked before the model loads


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


def test_fe_name_and_dims_come_from_the_model_description(fe_models):
    embedder = FastEmbedEmbedder("baai/BGE-small-en-v1.5")  # fastembed ignores case
    assert "fastembed:baai/BGE-small-en-v1.5" == embedder.name
    assert DIMS == embedder.dims
    assert [] == fe_models[0].calls  # nothing embedded to learn dims


def test_fe_dims_of_a_model_without_a_described_dim_are_measured(fe_models):
    embedder = FastEmbedEmbedder("custom/undescribed")
    assert 3 == embedder.dims
    assert [("embed", ["dims"])] == fe_models[0].calls


def test_fe_options_are_passed_to_text_embedding(fe_models):
    FastEmbedEmbedder("BAAI/bge-small-en-v1.5", threads=2, cache_dir="models")
    assert {"threads": 2, "cache_dir": "models"} == fe_models[0].kwargs


def test_fe_documents_are_float32_rows_in_order(fe_models):
    texts = ["one", "two words", "3"]
    vectors = FastEmbedEmbedder("BAAI/bge-small-en-v1.5").embed_documents(texts)
    assert np.float32 == vectors.dtype
    np.testing.assert_array_equal(rows_of(texts), vectors)
    assert [("embed", texts)] == fe_models[0].calls


def test_fe_query_goes_through_query_embed(fe_models):
    vector = FastEmbedEmbedder("BAAI/bge-small-en-v1.5").embed_query("where")
    assert np.float32 == vector.dtype
    np.testing.assert_array_equal(rows_of(["where"], "query: ")[0], vector)
    assert [("query_embed", ["where"])] == fe_models[0].calls


def test_fe_no_documents_embed_nothing(fe_models):
    assert (0, DIMS) == FastEmbedEmbedder("BAAI/bge-small-en-v1.5").embed_documents([]).shape
    assert [] == fe_models[0].calls


def test_fe_a_model_that_cannot_load_is_an_embedder_error(fe_models):
    with pytest.raises(EmbedderError, match="unsupported/model could not be loaded") as caught:
        FastEmbedEmbedder("unsupported/model")
    assert isinstance(caught.value.__cause__, ValueError)


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


def test_http_methods_are_coroutine_functions():
    embedder = http_embedder(Endpoint())
    assert inspect.iscoroutinefunction(embedder.embed_documents)
    assert inspect.iscoroutinefunction(embedder.embed_query)


def test_http_dims_given_make_no_request():
    endpoint = Endpoint()
    embedder = http_embedder(endpoint)
    assert "openai:text-embedding-3-small" == embedder.name
    assert DIMS == embedder.dims
    assert f"{BASE_URL}/embeddings" == embedder.url
    assert [] == endpoint.requests


def test_http_dims_not_given_are_learnt_by_one_blocking_request():
    endpoint = Endpoint()
    embedder = http_embedder(endpoint, dims=None)
    assert DIMS == embedder.dims
    assert [{"model": MODEL, "input": ["dims"]}] == endpoint.bodies


async def test_http_documents_are_float32_rows_in_the_order_of_the_texts():
    endpoint = Endpoint()
    texts = ["first", "second text", "3rd"]
    async with contextlib.aclosing(http_embedder(endpoint)) as embedder:
        vectors = await embedder.embed_documents(texts)
    assert np.float32 == vectors.dtype
    np.testing.assert_array_equal(rows_of(texts), vectors)  # data came back reversed
    assert [{"model": MODEL, "input": texts}] == endpoint.bodies
    assert f"{BASE_URL}/embeddings" == str(endpoint.requests[0].url)
    assert "POST" == endpoint.requests[0].method


async def test_http_query_is_one_float32_vector():
    async with contextlib.aclosing(http_embedder(Endpoint())) as embedder:
        vector = await embedder.embed_query("where")
    assert (DIMS,) == vector.shape
    assert np.float32 == vector.dtype
    np.testing.assert_array_equal(rows_of(["where"])[0], vector)


async def test_http_texts_go_batch_size_to_a_request_and_come_back_in_order():
    endpoint = Endpoint()
    texts = ["a", "bb", "ccc", "dddd", "eeeee"]
    async with contextlib.aclosing(http_embedder(endpoint, batch_size=2)) as embedder:
        vectors = await embedder.embed_documents(texts)
    assert [["a", "bb"], ["ccc", "dddd"], ["eeeee"]] == [b["input"] for b in endpoint.bodies]
    np.testing.assert_array_equal(rows_of(texts), vectors)


async def test_http_no_documents_make_no_request():
    endpoint = Endpoint()
    async with contextlib.aclosing(http_embedder(endpoint)) as embedder:
        assert (0, DIMS) == (await embedder.embed_documents([])).shape
    assert [] == endpoint.requests


async def test_http_the_key_is_sent_as_a_bearer_token():
    endpoint = Endpoint()
    async with contextlib.aclosing(http_embedder(endpoint, api_key=KEY)) as embedder:
        await embedder.embed_query("x")
    assert f"Bearer {KEY}" == endpoint.requests[0].headers["authorization"]


async def test_http_without_a_key_no_authorization_is_sent():
    endpoint = Endpoint()
    async with contextlib.aclosing(http_embedder(endpoint)) as embedder:
        await embedder.embed_query("x")
    assert "authorization" not in endpoint.requests[0].headers


async def test_http_a_status_500_is_a_one_line_embedder_error():
    endpoint = Endpoint(answering(500, text="upstream\nfailed"))
    async with contextlib.aclosing(http_embedder(endpoint)) as embedder:
        with pytest.raises(EmbedderError, match="answered HTTP 500: upstream failed") as caught:
            await embedder.embed_documents(["a"])
    assert "\n" not in str(caught.value)
    assert isinstance(caught.value.__cause__, httpx.HTTPStatusError)


async def test_http_an_error_never_shows_the_key():
    endpoint = Endpoint(answering(401, json={"error": {"message": f"Incorrect API key {KEY}"}}))
    async with contextlib.aclosing(http_embedder(endpoint, api_key=KEY)) as embedder:
        with pytest.raises(EmbedderError, match="HTTP 401") as caught:
            await embedder.embed_query("x")
    assert KEY not in str(caught.value)


async def test_http_a_body_that_is_not_json_is_an_embedder_error():
    endpoint = Endpoint(answering(200, text="<html>gateway</html>"))
    async with contextlib.aclosing(http_embedder(endpoint)) as embedder:
        with pytest.raises(EmbedderError, match="not JSON") as caught:
            await embedder.embed_query("x")
    assert isinstance(caught.value.__cause__, ValueError)


async def test_http_a_wrong_number_of_vectors_is_an_embedder_error():
    one = {"data": [{"index": 0, "embedding": vector_of("a")}]}
    async with contextlib.aclosing(http_embedder(Endpoint(answering(json=one)))) as embedder:
        with pytest.raises(EmbedderError, match="1 vectors for 2 texts"):
            await embedder.embed_documents(["a", "b"])


async def test_http_vectors_of_other_dims_are_an_embedder_error():
    short = {"data": [{"index": 0, "embedding": [1.0, 2.0, 3.0]}]}
    async with contextlib.aclosing(http_embedder(Endpoint(answering(json=short)))) as embedder:
        with pytest.raises(EmbedderError, match=r"shape \(1, 3\), not \(1, 4\)"):
            await embedder.embed_query("x")


@pytest.mark.parametrize(
    "body",
    [
        {"object": "list"},
        [[1.0, 2.0, 3.0, 4.0]],
        {"data": [{"embedding": [1.0, 2.0, 3.0, 4.0]}]},
        {"data": [{"index": 1, "embedding": [1.0, 2.0, 3.0, 4.0]}]},
        {"data": [{"index": True, "embedding": [1.0, 2.0, 3.0, 4.0]}]},
        {"data": [{"index": 0, "embedding": "AACAPwAAAEA="}]},  # base64, never asked for
        {"data": [{"index": 0, "embedding": [1.0, None, 3.0, 4.0]}]},
        {"data": [{"index": 0, "embedding": [1.0, "two", 3.0, 4.0]}]},
    ],
)
async def test_http_a_malformed_body_is_an_embedder_error(body):
    async with contextlib.aclosing(http_embedder(Endpoint(answering(json=body)))) as embedder:
        with pytest.raises(EmbedderError, match=f"^openai:{MODEL}: "):
            await embedder.embed_query("x")


async def test_http_a_repeated_index_is_an_embedder_error():
    twice = {"data": [{"index": 0, "embedding": vector_of("a")}] * 2}
    async with contextlib.aclosing(http_embedder(Endpoint(answering(json=twice)))) as embedder:
        with pytest.raises(EmbedderError, match="distinct index"):
            await embedder.embed_documents(["a", "b"])


async def test_http_a_request_that_fails_is_an_embedder_error_with_its_cause():
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    embedder = OpenAICompatibleEmbedder(
        MODEL, base_url=BASE_URL, dims=DIMS, transport=httpx.MockTransport(refuse)
    )
    async with contextlib.aclosing(embedder):
        with pytest.raises(EmbedderError, match="ConnectError: connection refused") as caught:
            await embedder.embed_query("x")
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


def test_http_a_probe_that_fails_is_an_embedder_error():
    with pytest.raises(EmbedderError, match="answered HTTP 503: loading model"):
        http_embedder(Endpoint(answering(503, text="loading model")), dims=None)


async def test_http_aclose_is_idempotent_and_a_later_request_opens_a_new_pool():
    endpoint = Endpoint()
    embedder = http_embedder(endpoint)
    await embedder.aclose()  # nothing opened yet
    await embedder.embed_query("a")
    await embedder.aclose()
    await embedder.aclose()
    await embedder.embed_query("b")
    await embedder.aclose()
    assert 2 == len(endpoint.requests)


@pytest.mark.parametrize(
    ("option", "value"),
    [("dims", 0), ("batch_size", 0), ("timeout", 0), ("timeout", "30"), ("base_url", " ")],
)
def test_http_options_are_checked(option, value):
    options: dict[str, Any] = {"base_url": BASE_URL, "dims": DIMS, option: value}
    with pytest.raises(InvalidArgumentError, match=option):
        OpenAICompatibleEmbedder(MODEL, **options)


# --- every adapter ---------------------------------------------------------------------


def test_every_adapter_is_an_embedder(st_models, fe_models):
    made = [
        SentenceTransformerEmbedder("all-MiniLM-L6-v2"),
        FastEmbedEmbedder("BAAI/bge-small-en-v1.5"),
        http_embedder(Endpoint()),
    ]
    for embedder in made:
        assert isinstance(embedder, Embedder)


# --- embedder_from_spec ----------------------------------------------------------------


def test_spec_sentence_transformers(st_models):
    embedder = embedder_from_spec("sentence-transformers:all-MiniLM-L6-v2", device="cpu")
    assert isinstance(embedder, SentenceTransformerEmbedder)
    assert "sentence-transformers:all-MiniLM-L6-v2" == embedder.name
    assert "cpu" == st_models[0].device


def test_spec_fastembed(fe_models):
    embedder = embedder_from_spec("fastembed:BAAI/bge-small-en-v1.5")
    assert isinstance(embedder, FastEmbedEmbedder)
    assert "fastembed:BAAI/bge-small-en-v1.5" == embedder.name


async def test_spec_openai_reads_the_url_and_key_from_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "https://gateway.example/openai/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    endpoint = Endpoint()
    embedder = embedder_from_spec(f"openai:{MODEL}", dims=DIMS, transport=endpoint.transport())
    assert isinstance(embedder, OpenAICompatibleEmbedder)
    async with contextlib.aclosing(embedder):
        await embedder.embed_query("x")
    assert f"openai:{MODEL}" == embedder.name
    assert "https://gateway.example/openai/v1/embeddings" == str(endpoint.requests[0].url)
    assert f"Bearer {KEY}" == endpoint.requests[0].headers["authorization"]


def test_spec_openai_defaults_to_the_openai_api(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    embedder = embedder_from_spec(f"openai:{MODEL}", dims=DIMS)
    assert isinstance(embedder, OpenAICompatibleEmbedder)
    assert "https://api.openai.com/v1/embeddings" == embedder.url


async def test_spec_options_win_over_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "https://ignored.example/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ignored")
    endpoint = Endpoint()
    embedder = embedder_from_spec(
        f"openai:{MODEL}",
        base_url=BASE_URL,
        api_key=KEY,
        name="team-embedder",
        dims=DIMS,
        transport=endpoint.transport(),
    )
    assert isinstance(embedder, OpenAICompatibleEmbedder)
    async with contextlib.aclosing(embedder):
        await embedder.embed_query("x")
    assert "team-embedder" == embedder.name
    assert f"{BASE_URL}/embeddings" == str(endpoint.requests[0].url)
    assert f"Bearer {KEY}" == endpoint.requests[0].headers["authorization"]


async def test_spec_ollama_is_the_local_server_without_a_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # not Ollama's
    monkeypatch.setenv("OPENAI_BASE_URL", "https://ignored.example/v1")
    endpoint = Endpoint()
    embedder = embedder_from_spec(
        "ollama:nomic-embed-text:latest", dims=DIMS, transport=endpoint.transport()
    )
    assert isinstance(embedder, OpenAICompatibleEmbedder)
    async with contextlib.aclosing(embedder):
        await embedder.embed_documents(["a"])
    assert "ollama:nomic-embed-text:latest" == embedder.name
    assert "http://localhost:11434/v1/embeddings" == str(endpoint.requests[0].url)
    assert [{"model": "nomic-embed-text:latest", "input": ["a"]}] == endpoint.bodies
    assert "authorization" not in endpoint.requests[0].headers


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "openai",
        ":text-embedding-3-small",
        "openai:",
        "cohere:embed-v3",
        "OpenAI:x",
        " openai:x",
    ],
)
def test_spec_malformed_or_unknown_is_refused_with_the_providers(spec):
    with pytest.raises(InvalidArgumentError) as caught:
        embedder_from_spec(spec)
    message = str(caught.value)
    assert "\n" not in message
    assert "fastembed, ollama, openai, python, sentence-transformers" in message
    assert repr(spec) in message


def test_spec_that_is_not_a_str_is_refused():
    with pytest.raises(InvalidArgumentError, match="PROVIDER:MODEL"):
        embedder_from_spec(None)  # type: ignore[arg-type]


# --- a missing library -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "module", "extra"),
    [
        (
            "sentence-transformers:all-MiniLM-L6-v2",
            "sentence_transformers",
            "sentence-transformers",
        ),
        ("fastembed:BAAI/bge-small-en-v1.5", "fastembed", "fastembed"),
    ],
)
def test_a_missing_library_names_the_extra(monkeypatch, spec, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # what `import` does for a module not there
    with pytest.raises(EmbedderError) as caught:
        embedder_from_spec(spec)
    assert f"{module} is not installed: pip install 'loopctl-memory[{extra}]'" == str(caught.value)
    assert isinstance(caught.value.__cause__, ImportError)


def test_a_missing_http_client_names_the_http_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "httpx", None)
    monkeypatch.setitem(sys.modules, "httpx2", None)
    monkeypatch.delitem(sys.modules, "loopctl_memory.embedders.http")  # restored after
    expected = "httpx is not installed: pip install 'loopctl-memory[http]'"
    with pytest.raises(EmbedderError, match=expected.replace("[", r"\[")):
        embedder_from_spec(f"openai:{MODEL}", dims=DIMS)
    with pytest.raises(EmbedderError, match="loopctl-memory\\[http\\]"):
        _ = embedders.OpenAICompatibleEmbedder


# --- the package -----------------------------------------------------------------------


def test_the_package_gives_every_adapter_by_name():
    assert sorted(embedders.__all__) == embedders.__all__
    assert embedders.SentenceTransformerEmbedder is SentenceTransformerEmbedder
    assert embedders.FastEmbedEmbedder is FastEmbedEmbedder
    assert embedders.OpenAICompatibleEmbedder is OpenAICompatibleEmbedder
    with pytest.raises(AttributeError):
        _ = embedders.CohereEmbedder


def test_importing_the_package_loads_no_adapter():
    code = (
        "import sys, loopctl_memory.embedders\n"
        "print(sorted(m for m in sys.modules if m.startswith('loopctl_memory.embedders.')"
        " or m.split('.')[0] in ('httpx', 'httpx2', 'sentence_transformers', 'fastembed')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert "[]" == result.stdout.strip()
