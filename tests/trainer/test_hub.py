"""Hub downloads fail at once when the hub cannot be reached (trainer.hub): an offline machine
gets its error after one request per endpoint, never after huggingface_hub's back-off.

The offline fixture points ``HF_ENDPOINT`` and the public fallback at ``.invalid`` hosts,
which never resolve (RFC 2606), so the tests make real requests that really fail to
resolve; they count the requests and the back-off sleeps instead of timing anything.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import huggingface_hub
import pytest

from trainer import hub
from trainer.task.motion import DANCE_MOTION_ID, MotionError, resolve_motion

REPO = "unilabsim/unilab-motions"
CUSTOM = "http://nonexistent.invalid"
PUBLIC = "http://public-hub.nonexistent.invalid"


@dataclass
class Attempts:
    heads: list[str] = field(default_factory=list)
    downloads: list[object] = field(default_factory=list)
    sleeps: list[float] = field(default_factory=list)


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[Attempts]:
    """Both endpoints unresolvable; every HEAD, download and back-off sleep is counted."""
    seen = Attempts()
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", CUSTOM)
    monkeypatch.setattr(hub, "PUBLIC_HF_ENDPOINT", PUBLIC)
    real_head = huggingface_hub.get_hf_file_metadata
    real_download = huggingface_hub.hf_hub_download

    def head(url: str, *args: object, **kwargs: object) -> object:
        seen.heads.append(url)
        return real_head(url, *args, **kwargs)

    def download(*args: object, **kwargs: object) -> object:
        seen.downloads.append(kwargs.get("endpoint"))
        return real_download(*args, **kwargs)

    monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", head)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    monkeypatch.setattr(time, "sleep", seen.sleeps.append)
    yield seen


def _chain(err: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    while err is not None and err not in out:
        out.append(err)
        err = err.__cause__ or err.__context__  # type: ignore[assignment]
    return out


def test_an_unresolvable_hub_fails_after_one_request_per_endpoint(
    offline: Attempts, tmp_path: Path
) -> None:
    with pytest.raises(hub.HubUnreachable) as info:
        hub.download(REPO, DANCE_MOTION_ID, tmp_path)
    assert str(info.value).startswith(
        "cannot reach the Hugging Face hub at public-hub.nonexistent.invalid: "
        "the host name does not resolve ("
    )
    assert str(info.value).endswith(
        "; check the network or HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use the cache only"
    )
    assert any(isinstance(link, socket.gaierror) for link in _chain(info.value))
    assert [url.split("/datasets/")[0] for url in offline.heads] == [CUSTOM, PUBLIC]
    assert offline.downloads == [] and offline.sleeps == []
    assert not any(tmp_path.iterdir())


def test_resolve_motion_reports_the_unreachable_hub_in_its_one_line(
    offline: Attempts, tmp_path: Path
) -> None:
    with pytest.raises(MotionError) as info:
        resolve_motion(DANCE_MOTION_ID, asset_roots=(tmp_path / "pkg", tmp_path / "cache"))
    message = str(info.value)
    assert "; hub download failed: HubUnreachable: cannot reach the Hugging Face hub at " in message
    assert message.endswith("(generate with: g1-pull-assets --robot g1)")
    assert "\n" not in message
    assert len(offline.heads) == 2 and offline.downloads == [] and offline.sleeps == []


def test_a_refused_connection_fails_at_once_too(
    offline: Attempts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as sock:  # a port nothing listens on once the socket is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(hub, "PUBLIC_HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(hub.HubUnreachable, match=r"127\.0\.0\.1:\d+: no connection \(ConnectError"):
        hub.download(REPO, DANCE_MOTION_ID, tmp_path)
    assert len(offline.heads) == 1 and offline.downloads == [] and offline.sleeps == []


def test_an_unknown_name_that_is_no_asset_id_never_reaches_the_hub(
    offline: Attempts, tmp_path: Path
) -> None:
    with pytest.raises(MotionError) as info:
        resolve_motion("dnace", asset_roots=(tmp_path / "pkg", tmp_path / "cache"))
    assert str(info.value) == (
        f"motion file 'dnace' not found (searched: dnace, {tmp_path / 'pkg' / 'dnace'}, "
        f"{tmp_path / 'cache' / 'dnace'}); it is no path and no asset id (those end in .npz or .csv), "
        "so the hub was not asked; offline alternative: "
        "env.commands.motion.motion_file=motions/g1/synthetic_dance.npz "
        "(generate with: g1-pull-assets --robot g1)"
    )
    assert offline.heads == [] and offline.downloads == []


@pytest.mark.parametrize(
    ("err", "expected"),
    [
        (socket.gaierror(-2, "Name or service not known"), "the host name does not resolve"),
        (OSError("Temporary failure in name resolution"), "the host name does not resolve"),
        (ConnectionRefusedError(111, "Connection refused"), "no connection (ConnectionRefused"),
        (type("ConnectTimeout", (Exception,), {})("timed out"), "no connection (ConnectTimeout"),
        (ValueError("404 Client Error: Entry Not Found"), None),
        (TimeoutError("read timed out"), None),
    ],
)
def test_connection_failures_are_told_from_answers(err: Exception, expected: str | None) -> None:
    wrapped = RuntimeError("An error happened while trying to locate the file on the Hub")
    wrapped.__cause__ = err
    found = hub.connection_failure(wrapped)
    if expected is None:
        assert found is None
    else:
        assert found is not None and found.startswith(expected), found


def test_endpoints_are_the_custom_one_then_the_public_hub_once() -> None:
    assert hub.endpoints({}) == [None]
    assert hub.endpoints({"HF_ENDPOINT": "https://huggingface.co/"}) == ["https://huggingface.co"]
    assert hub.endpoints({"HF_ENDPOINT": "http://mirror:8080/"}) == [
        "http://mirror:8080",
        "https://huggingface.co",
    ]
