"""The OpenAI-compatible HTTP adapter against an httpx ``MockTransport``."""

from __future__ import annotations

import contextlib
import inspect
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from loopctl_memory import EmbedderError, InvalidArgumentError
from loopctl_memory.embedders.http import OpenAICompatibleEmbedder

if TYPE_CHECKING:
    import httpx2 as httpx
else:
    from loopctl_memory.embedders.http import httpx  # the client library the adapter uses

from tests.unit.model_fakes import (
    BASE_URL,
    DIMS,
    KEY,
    MODEL,
    Endpoint,
    answering,
    http_embedder,
    rows_of,
    vector_of,
)


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
