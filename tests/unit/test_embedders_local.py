"""The local-model adapters (sentence-transformers, fastembed) against fakes of their libraries."""

from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING

import numpy as np
import pytest

from loopctl_memory import EmbedderError, InvalidArgumentError
from loopctl_memory.embedders import downloads
from loopctl_memory.embedders.fastembed import FastEmbedEmbedder
from loopctl_memory.embedders.sentence_transformers import SentenceTransformerEmbedder

if TYPE_CHECKING:
    pass
else:
    pass  # the client library the adapter uses

from tests.unit.model_fakes import (
    DIMS,
    Encode,
    rows_of,
)


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
    assert {"threads": 2, "cache_dir": "models", "local_files_only": True} == fe_models[0].kwargs


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


# --- a model not in the cache: downloaded when the hub answers, refused at once when not ---


class _CachedOnly:
    """A library whose model is cached or not: a cached-only load of one not cached fails."""

    def __init__(self, cached: bool) -> None:
        self.cached = cached
        self.loads: list[dict[str, object]] = []

    def __call__(self, **options: object) -> str:
        self.loads.append(options)
        if options.get("local_files_only") and not self.cached:
            raise OSError("not in the cache and local_files_only=True")
        return "the model"


def test_a_cached_model_loads_without_the_network(monkeypatch):
    monkeypatch.setattr(downloads, "hub_reachable", _never_asked)
    library = _CachedOnly(cached=True)
    assert "the model" == downloads.load("fastembed:m", library, {"threads": 2})
    assert [{"threads": 2, "local_files_only": True}] == library.loads


def test_a_model_not_cached_is_refused_at_once_when_the_hub_cannot_be_reached(monkeypatch):
    monkeypatch.setattr(downloads, "hub_reachable", lambda: False)
    library = _CachedOnly(cached=False)
    with pytest.raises(EmbedderError, match=r"not in the local model cache and huggingface\.co"):
        downloads.load("fastembed:m", library, {})
    assert [{"local_files_only": True}] == library.loads  # no download tried: no retries


def test_a_model_not_cached_is_downloaded_saying_so(monkeypatch, caplog):
    monkeypatch.setattr(downloads, "hub_reachable", lambda: True)
    library = _CachedOnly(cached=False)
    with caplog.at_level(logging.WARNING):
        assert "the model" == downloads.load("sentence-transformers:m", library, {})
    assert [{"local_files_only": True}, {}] == library.loads
    assert ["sentence-transformers:m is not in the local model cache: downloading it from"
            " huggingface.co"] == [record.getMessage() for record in caplog.records]  # fmt: skip


def test_an_explicit_local_files_only_is_one_attempt_as_given(monkeypatch):
    monkeypatch.setattr(downloads, "hub_reachable", _never_asked)
    library = _CachedOnly(cached=False)
    with pytest.raises(EmbedderError, match="could not be loaded: not in the cache"):
        downloads.load("fastembed:m", library, {"local_files_only": True})
    assert [{"local_files_only": True}] == library.loads


def test_the_hub_is_reachable_behind_a_proxy_without_asking_it(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setattr(socket, "create_connection", _never_asked)
    assert downloads.hub_reachable()


def _never_asked(*args: object, **kwargs: object) -> bool:
    raise AssertionError("the network was asked")
