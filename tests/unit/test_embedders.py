"""Every adapter, ``embedder_from_spec``, a missing library, and the package's lazy loading."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from loopctl_memory import Embedder, EmbedderError, InvalidArgumentError, embedders
from loopctl_memory.embedders import embedder_from_spec
from loopctl_memory.embedders.fastembed import FastEmbedEmbedder
from loopctl_memory.embedders.http import OpenAICompatibleEmbedder
from loopctl_memory.embedders.sentence_transformers import SentenceTransformerEmbedder

if TYPE_CHECKING:
    pass
else:
    pass  # the client library the adapter uses

from tests.unit.model_fakes import (
    BASE_URL,
    DIMS,
    KEY,
    MODEL,
    Endpoint,
    http_embedder,
)

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
    assert (
        f"{module} is not installed: pip install 'loopctl-memory[{extra}]'"
        f" (from a checkout of loopctl-memory: pip install -e '.[{extra}]')"
    ) == str(caught.value)
    assert isinstance(caught.value.__cause__, ImportError)


def test_a_missing_http_client_names_the_http_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "httpx", None)
    monkeypatch.setitem(sys.modules, "httpx2", None)
    monkeypatch.delitem(sys.modules, "loopctl_memory.embedders.http")  # restored after
    expected = (
        "httpx is not installed: pip install 'loopctl-memory[http]'"
        " (from a checkout of loopctl-memory: pip install -e '.[http]')"
    )
    with pytest.raises(EmbedderError, match=re.escape(expected)):
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
