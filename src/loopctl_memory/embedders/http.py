"""OpenAICompatibleEmbedder: an OpenAI-compatible ``/embeddings`` endpoint as an async Embedder.

The client library is httpx (the ``http`` extra), or else httpx2, the
continuation of httpx under the same API that the MCP SDK installs; without
either, importing this module raises :class:`~loopctl_memory.EmbedderError`
naming the extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from loopctl_memory.embedders.extras import missing_extra
from loopctl_memory.embedding import float32_rows
from loopctl_memory.errors import EmbedderError, InvalidArgumentError

if TYPE_CHECKING:
    import httpx2 as httpx  # always installed with the MCP SDK; httpx has the same API
else:
    try:
        import httpx
    except ImportError:
        try:
            import httpx2 as httpx
        except ImportError as exc:
            raise missing_extra("httpx", "http") from exc

_HTTP_ERRORS = (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError)
"""Everything the client raises for a request that could not be made or read."""

PROBE_TEXT = "dims"
"""The text embedded once at construction to learn ``dims`` when it is not given."""


class OpenAICompatibleEmbedder:
    """An endpoint that answers ``POST {base_url}/embeddings`` as OpenAI's does.

    OpenAI itself, Ollama (``http://localhost:11434/v1``), vLLM, LiteLLM, LM
    Studio, llama.cpp's server... Its ``embed_documents`` and ``embed_query``
    are coroutine functions: the store awaits them on its event loop. Texts
    go ``batch_size`` to a request, one request after another, each body
    ``{"model": model, "input": [...]}``; the vectors come back in the order
    of the texts, whatever the order of ``data`` (each item's ``index`` says).

    When ``dims`` is not given, the constructor learns it by embedding one
    text (:data:`PROBE_TEXT`) in a blocking request; give ``dims`` to make an
    embedder without a request, say inside a running event loop.

    The requests of one embedder share a connection pool, which belongs to
    the event loop of its first request: use an embedder on one loop, and
    close it there with :meth:`aclose`.

    Args:
        model: The model's id at the endpoint (``"text-embedding-3-small"``).
        base_url: The API's root, before ``/embeddings``
            (``"https://api.openai.com/v1"``).
        api_key: Sent as ``Authorization: Bearer <api_key>``; ``None`` sends no
            such header. It never appears in an error message.
        dims: How many numbers each vector has; ``None`` asks the endpoint.
        timeout: Seconds a request may take (connect, read, write, pool each).
        batch_size: The most texts in one request.
        name: The id the store records; ``"openai:" + model`` when ``None``.
        transport: An httpx ``MockTransport`` to answer the requests in place
            of the network (tests), the probe's included.

    Raises:
        InvalidArgumentError: ``dims``, ``timeout`` or ``batch_size`` is not
            positive, or ``model`` or ``base_url`` is empty.
        EmbedderError: The probe request failed (only when ``dims`` is None).

    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None = None,
        dims: int | None = None,
        timeout: float = 30.0,
        batch_size: int = 256,
        name: str | None = None,
        transport: httpx.MockTransport | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise InvalidArgumentError(f"model must be a non-empty str, not {model!r}")
        if not isinstance(base_url, str) or not base_url.strip():
            raise InvalidArgumentError(f"base_url must be a non-empty str, not {base_url!r}")
        _check_positive_int("batch_size", batch_size)
        if dims is not None:
            _check_positive_int("dims", dims)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise InvalidArgumentError(f"timeout must be a positive number, not {timeout!r}")
        self._model = model
        self._url = base_url.strip().rstrip("/") + "/embeddings"
        self._api_key = api_key or None
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = float(timeout)
        self._batch_size = batch_size
        self._name = name or f"openai:{model}"
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._dims = dims if dims is not None else self._probe_dims()

    @property
    def name(self) -> str:
        """The ``name`` given, else ``"openai:" + model``."""
        return self._name

    @property
    def dims(self) -> int:
        """The ``dims`` given, else the length of the probe's vector."""
        return self._dims

    @property
    def url(self) -> str:
        """Where the requests go: ``base_url + "/embeddings"``."""
        return self._url

    async def embed_documents(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """One vector a text, in order: float32 of shape ``(len(texts), dims)``.

        Raises:
            EmbedderError: A request failed, was answered with a status other
                than 2xx, or with a body that is not that many vectors of ``dims``
                numbers. The client's exception, if any, is chained.

        """
        texts = list(texts)
        if not texts:
            return np.empty((0, self._dims), dtype=np.float32)
        batches = [
            await self._embed_batch(texts[start : start + self._batch_size])
            for start in range(0, len(texts), self._batch_size)
        ]
        return batches[0] if len(batches) == 1 else np.concatenate(batches)

    async def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """The query's vector, float32 of shape ``(dims,)``.

        Raises:
            EmbedderError: As :meth:`embed_documents`.

        """
        return (await self._embed_batch([text])).reshape(self._dims)

    async def aclose(self) -> None:
        """Close the connection pool; a later request opens another. Idempotent."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def _embed_batch(self, texts: list[str]) -> npt.NDArray[np.float32]:
        if self._client is None:
            self._client = httpx.AsyncClient(
                headers=self._headers, timeout=self._timeout, transport=self._transport
            )
        try:
            response = await self._client.post(self._url, json=self._body(texts))
        except _HTTP_ERRORS as exc:
            raise self._error(f"POST {self._url} failed: {type(exc).__name__}: {exc}") from exc
        vectors = self._vectors(response, len(texts))
        return float32_rows(vectors, len(texts), self._dims, self._name)

    def _probe_dims(self) -> int:
        try:
            with httpx.Client(
                headers=self._headers, timeout=self._timeout, transport=self._transport
            ) as client:
                response = client.post(self._url, json=self._body([PROBE_TEXT]))
        except _HTTP_ERRORS as exc:
            raise self._error(
                f"POST {self._url} (to learn dims) failed: {type(exc).__name__}: {exc}"
            ) from exc
        (vector,) = self._vectors(response, 1)
        if not vector:
            raise self._error(f"POST {self._url} answered an empty vector")
        return len(float32_rows([vector], 1, len(vector), self._name)[0])

    def _body(self, texts: list[str]) -> dict[str, Any]:
        return {"model": self._model, "input": texts}

    def _vectors(self, response: httpx.Response, count: int) -> list[list[Any]]:
        """The ``embedding`` lists of ``response``, ordered by ``index``, checked for count."""
        try:
            response.raise_for_status()
        except httpx.HTTPStatusError as exc:
            raise self._error(
                f"POST {self._url} answered HTTP {response.status_code}: {response.text[:200]}"
            ) from exc
        try:
            body = response.json()
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise self._error(f"POST {self._url} answered a body that is not JSON") from exc
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise self._error(f"POST {self._url} answered JSON without a 'data' list")
        if len(data) != count:
            raise self._error(f"POST {self._url} answered {len(data)} vectors for {count} texts")
        ordered: list[list[Any] | None] = [None] * count
        for item in data:
            index = item.get("index") if isinstance(item, dict) else None
            embedding = item.get("embedding") if isinstance(item, dict) else None
            if (
                not isinstance(index, int)
                or isinstance(index, bool)
                or not 0 <= index < count
                or ordered[index] is not None
                or not isinstance(embedding, list)
            ):
                raise self._error(
                    f"POST {self._url} answered a 'data' item without a distinct index "
                    f"below {count} and an 'embedding' list"
                )
            ordered[index] = embedding
        return [vector for vector in ordered if vector is not None]

    def _error(self, message: str) -> EmbedderError:
        # One line, and never the key: an endpoint may echo it, or a base_url carry it.
        line = " ".join(f"{self._name}: {message}".split())
        if self._api_key:
            line = line.replace(self._api_key, "***")
        return EmbedderError(line)

    def __repr__(self) -> str:
        return f"OpenAICompatibleEmbedder({self._name!r}, url={self._url!r}, dims={self._dims})"


def _check_positive_int(what: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgumentError(f"{what} must be a positive int, not {value!r}")
