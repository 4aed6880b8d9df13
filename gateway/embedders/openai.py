"""Query embeddings from any OpenAI-compatible ``POST {url}/embeddings`` endpoint.

OpenAI itself, vLLM, Hugging Face TEI, Ollama and LiteLLM all speak this shape:
request ``{"model", "input", "dimensions"?}``, answer
``{"data": [{"embedding": [...], "index": 0}]}``. One ``httpx.AsyncClient`` is
kept for the embedder's lifetime (connection reuse matters: one call per
query). Connection failures, 429 and 5xx are retried within the request
deadline; every failure becomes :class:`EmbedderUnavailable` with a fixed
message — never the URL or the key.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import httpx

from connectors.retry import remaining, retry_read
from gateway.embedders.base import EmbedderUnavailable, QueryEmbedder, l2_normalise

log = logging.getLogger(__name__)


class _HTTPStatusError(Exception):
    def __init__(self, status: int, retry_after_ms: int) -> None:
        super().__init__(status)
        self.status = status
        self.retry_after_ms = retry_after_ms


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, _HTTPStatusError):
        return exc.status == 429 or exc.status >= 500
    if isinstance(exc, httpx.ConnectTimeout):
        return True
    return isinstance(exc, httpx.TransportError) and not isinstance(exc, httpx.TimeoutException)


def _retry_after_ms(response: httpx.Response) -> int:
    value = response.headers.get("retry-after", "").strip()
    return int(value) * 1000 if value.isdigit() else 1000


class OpenAICompatibleEmbedder(QueryEmbedder):
    """Embeds a query by one POST to ``{url}/embeddings``.

    ``url`` is the API base (``https://api.openai.com/v1``,
    ``http://localhost:11434/v1`` for Ollama); a URL already ending in
    ``/embeddings`` is used as it is. ``dimensions`` is sent when set (models
    that support shortening honour it) and checked against the answer.
    """

    def __init__(
        self,
        *,
        url: str,
        model: str,
        api_key: str | None = None,
        dimensions: int | None = None,
        timeout_s: float = 5.0,
        normalize: bool = True,
        retries: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        base = url.rstrip("/")
        self._endpoint = base if base.endswith("/embeddings") else base + "/embeddings"
        self._model = model
        self._dimensions = dimensions
        self._seen_dimensions: int | None = None
        self._timeout_s = timeout_s
        self._normalize = normalize
        self._retries = retries
        headers = {"Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.AsyncClient(
            headers=headers, timeout=timeout_s, transport=transport, follow_redirects=False
        )

    @property
    def model_name(self) -> str | None:
        return self._model

    @property
    def dimensions(self) -> int | None:
        return self._dimensions or self._seen_dimensions

    async def embed_query(self, text: str) -> list[float]:
        """POST the query and return its (normalised, when configured) vector.

        Raises:
            EmbedderUnavailable: the service cannot be reached, fails, refuses,
                times out, or answers with something that is not one vector of
                the configured width.
        """
        body: dict[str, Any] = {"model": self._model, "input": text}
        if self._dimensions is not None:
            body["dimensions"] = self._dimensions

        async def call() -> httpx.Response:
            timeout = min(self._timeout_s, remaining(self._timeout_s))
            response = await self._client.post(self._endpoint, json=body, timeout=timeout)
            if response.status_code >= 400:
                raise _HTTPStatusError(response.status_code, _retry_after_ms(response))
            return response

        try:
            response = await retry_read(call, transient=_transient, attempts=self._retries)
        except _HTTPStatusError as exc:
            log.debug("embedding service answered HTTP %s", exc.status)
            if exc.status == 429 or exc.status >= 500:
                raise EmbedderUnavailable(
                    f"embedding service answered HTTP {exc.status}", exc.retry_after_ms
                ) from exc
            raise EmbedderUnavailable(
                f"embedding service refused the request (HTTP {exc.status})", retryable=False
            ) from exc
        except httpx.TimeoutException as exc:
            log.debug("embedding service timed out: %r", exc)
            raise EmbedderUnavailable("embedding service did not answer in time") from exc
        except httpx.HTTPError as exc:
            log.debug("embedding service unreachable: %r", exc)
            raise EmbedderUnavailable("embedding service cannot be reached") from exc
        vector = self._parse(response)
        return l2_normalise(vector) if self._normalize else vector

    def _parse(self, response: httpx.Response) -> list[float]:
        try:
            data = response.json()["data"]
            item = min(data, key=lambda d: d.get("index", 0)) if len(data) > 1 else data[0]
            raw = item["embedding"]
            if not isinstance(raw, list) or not raw:
                raise TypeError("embedding is not a non-empty list")
            vector = [float(x) for x in raw]
            if any(isinstance(x, bool) for x in raw) or not all(map(math.isfinite, vector)):
                raise ValueError("embedding holds non-numbers")
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
            log.debug("embedding service answer unreadable: %r", exc)
            raise EmbedderUnavailable("embedding service sent an unreadable answer") from exc
        if self._dimensions is not None and len(vector) != self._dimensions:
            raise EmbedderUnavailable(
                f"embedding service returned {len(vector)} dimensions, "
                f"embedder.dimensions is {self._dimensions}"
            )
        self._seen_dimensions = len(vector)
        return vector

    async def aclose(self) -> None:
        await self._client.aclose()
