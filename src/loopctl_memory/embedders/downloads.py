"""Loading a local model: from the cache without the network first, downloading only if needed.

sentence-transformers and fastembed download a model that is not cached, and
retry when the network is down (fastembed for about 40 s, logging each try)
before they give up. :func:`load` asks the library for the cached model first
(``local_files_only=True``, no network at all: the usual case), and only when
it is not there looks whether the model hub can be reached at all: if not, it
fails at once saying so; if so, it says what it waits for and downloads.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from typing import Any

from loopctl_memory.errors import EmbedderError

logger = logging.getLogger(__name__)

HUB = ("huggingface.co", 443)
"""Where both libraries download models from (fastembed falls back to its own bucket)."""

_PROXIES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
_PROBE_SECONDS = 3.0


def hub_reachable() -> bool:
    """Whether a TCP connection to the hub opens within 3 s (true behind a proxy: it decides)."""
    if any(os.environ.get(name) for name in _PROXIES):
        return True
    try:
        socket.create_connection(HUB, timeout=_PROBE_SECONDS).close()
    except OSError:
        return False
    return True


def load(name: str, make: Callable[..., Any], options: dict[str, Any]) -> Any:
    """The model ``make(**options)`` loads: the cached one, else downloaded if the hub answers.

    ``name``: the embedder's, for messages. ``options`` that already say
    ``local_files_only`` are used as given, in one attempt.

    Raises:
        EmbedderError: the model could not be loaded; or it is not cached and
            the hub cannot be reached (at once, without the library's retries).

    """
    if "local_files_only" in options:
        return _made(name, make, options)
    try:
        return make(**options, local_files_only=True)
    except Exception as cached_failure:  # not cached (or not loadable: the download says)
        if not hub_reachable():
            raise EmbedderError(
                f"{name} could not be loaded: it is not in the local model cache and"
                f" {HUB[0]} cannot be reached (offline?): connect once to download it,"
                f" or give a model directory ({cached_failure})"
            ) from cached_failure
    logger.warning("%s is not in the local model cache: downloading it from %s", name, HUB[0])
    return _made(name, make, options)


def _made(name: str, make: Callable[..., Any], options: dict[str, Any]) -> Any:
    try:
        return make(**options)
    except Exception as exc:  # any failure to load (unknown name, offline, bad files)
        raise EmbedderError(f"{name} could not be loaded: {exc}") from exc
