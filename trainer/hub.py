"""Hugging Face hub downloads that fail at once when the hub cannot be reached.

``hf_hub_download`` retries a failed connection five times with exponential back-off
(about 23 s of sleeping, more with a second endpoint) before it gives up, even when the
host name does not resolve at all, which is what an offline machine sees. So each
endpoint first gets one HEAD request for the file without retries: if that fails to
resolve the host or to connect, the download stops there with :class:`HubUnreachable`;
anything else (the file exists, 404, 401, a 5xx) goes on to ``hf_hub_download``, whose
own handling and retries are right for those. Nothing is imported from huggingface_hub
until a download is asked for.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator, Mapping
from pathlib import Path
from urllib.parse import urlparse

__all__ = [
    "PUBLIC_HF_ENDPOINT",
    "HubUnreachable",
    "connection_failure",
    "download",
    "endpoints",
    "probe",
]

logger = logging.getLogger(__name__)

PUBLIC_HF_ENDPOINT = "https://huggingface.co"
ENDPOINT_ENV = "HF_ENDPOINT"

_RESOLUTION_TEXTS = (
    "name or service not known",
    "temporary failure in name resolution",
    "nodename nor servname provided",
    "no address associated with hostname",
    "getaddrinfo failed",
    "failed to resolve",
)
_RESOLUTION_TYPES = frozenset({"NameResolutionError"})
_CONNECT_TYPES = frozenset(
    {"ConnectError", "ConnectTimeout", "NewConnectionError", "ConnectionError", "ProxyError"}
)


class HubUnreachable(ConnectionError):
    """The hub's host does not resolve or takes no connection; retrying would only wait."""


def _chain(err: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def connection_failure(err: BaseException) -> str | None:
    """Why ``err`` means the hub was never reached, or None when it was (or may have been).

    Looks through the whole cause chain, by type name so that huggingface_hub's, httpx's,
    requests' and urllib3's errors all count: a name-resolution failure (``socket.gaierror``,
    ``NameResolutionError``, the resolver's messages) or a failed connect (``ConnectError``,
    ``ConnectTimeout``, ``NewConnectionError``, ``ProxyError``, any ``ConnectionError``).
    Read timeouts and HTTP errors are not connection failures.
    """
    connect: BaseException | None = None
    for link in _chain(err):
        names = {cls.__name__ for cls in type(link).__mro__}
        text = str(link).strip()
        resolution = isinstance(link, socket.gaierror) or bool(names & _RESOLUTION_TYPES)
        if resolution or any(t in text.lower() for t in _RESOLUTION_TEXTS):
            return f"the host name does not resolve ({text or type(link).__name__})"
        if connect is None and (names & _CONNECT_TYPES or isinstance(link, ConnectionError)):
            connect = link
    if connect is not None:
        return f"no connection ({type(connect).__name__}: {str(connect).strip() or 'no detail'})"
    return None


def endpoints(environ: Mapping[str, str] | None = None) -> list[str | None]:
    """The endpoints to try, in order: ``$HF_ENDPOINT`` (None = huggingface_hub's default),
    then the public hub once when a custom endpoint is set."""
    env = os.environ if environ is None else environ
    custom = env.get(ENDPOINT_ENV, "").strip().rstrip("/")
    found: list[str | None] = [custom or None]
    if custom and custom != PUBLIC_HF_ENDPOINT:
        found.append(PUBLIC_HF_ENDPOINT)
    return found


def _host(endpoint: str | None) -> str:
    if endpoint is None:
        from huggingface_hub import constants

        endpoint = constants.ENDPOINT
    return urlparse(endpoint).netloc or endpoint


def probe(repo_id: str, filename: str, endpoint: str | None, *, repo_type: str = "dataset") -> None:
    """One HEAD request for the file at ``endpoint``, never retried.

    Raises:
        HubUnreachable: the host does not resolve or takes no connection.
    """
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    url = hf_hub_url(repo_id, filename, repo_type=repo_type, endpoint=endpoint)
    try:
        get_hf_file_metadata(url)
    except Exception as err:  # many types; only connection failures stop here
        why = connection_failure(err)
        if why is None:
            return  # the hub answered (or may have): hf_hub_download reports or retries it
        raise HubUnreachable(
            f"cannot reach the Hugging Face hub at {_host(endpoint)}: {why}; check the network "
            f"or {ENDPOINT_ENV}, or set HF_HUB_OFFLINE=1 to use the cache only"
        ) from err


def download(
    repo_id: str,
    filename: str,
    local_dir: Path,
    *,
    repo_type: str = "dataset",
    environ: Mapping[str, str] | None = None,
) -> Path:
    """Download ``filename`` of ``repo_id`` into ``local_dir``; each endpoint of
    :func:`endpoints` is probed first and tried once.

    Raises:
        HubUnreachable: the last endpoint could not be reached.
        Exception: whatever huggingface_hub raised on the last endpoint otherwise.
    """
    from huggingface_hub import hf_hub_download

    tried = endpoints(environ)
    for attempt, endpoint in enumerate(tried):
        try:
            probe(repo_id, filename, endpoint, repo_type=repo_type)
            return Path(
                hf_hub_download(
                    repo_id=repo_id,
                    repo_type=repo_type,
                    filename=filename,
                    local_dir=local_dir,
                    endpoint=endpoint,
                )
            )
        except Exception as err:  # the cause goes into the caller's message
            if attempt + 1 == len(tried):
                raise
            logger.warning(
                "%s=%s failed (%s); trying %s",
                ENDPOINT_ENV,
                endpoint,
                " ".join(str(err).split())[:300] or type(err).__name__,
                tried[attempt + 1],
            )
    raise AssertionError("unreachable: the endpoint list is never empty")
