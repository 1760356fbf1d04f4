"""Waiting on the peer: low-latency polling, peer death and the stalled-peer watchdog.

The learner and the collector (a process, or a thread of ``train``) wait on counters in the
control block (control.py). A wait spins for a few microseconds (an iteration is ~10 ms at 100k env steps/s, so a wake-up
must cost far less than that), then sleeps in growing steps up to 250 µs. Every
``check_interval_s`` it also checks:

- its own stop/cancel conditions (``interrupt``), which may raise;
- the peer's identity: the collector checks the learner by PID + start time
  (contracts.procfs), the learner checks its child process object;
- the stalled-peer watchdog (docs/contracts.md §shutdown ``timeout/stale_tick``): the wait fails when
  the peer has itself been WAITING, without bumping its progress counter, for
  ``stale_after_s`` (30 s) while we wait too. A peer that is BUSY (compiling, capturing a
  graph, building the env) is never timed out: slow phases have no fixed deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from contracts import procfs
from trainer.runtime.control import ControlBlock, State, Word

STALE_AFTER_S = 30.0
SPIN_S = 100e-6
MAX_SLEEP_S = 250e-6
CHECK_INTERVAL_S = 0.05


class StaleTick(RuntimeError):
    """The peer waited without progress for the watchdog period while we waited on it."""


class PeerDied(RuntimeError):
    """The peer process is gone (or its PID was reused)."""


class StopRequested(Exception):
    """A wait ended because the other side asked this side to stop."""


class Waiter:
    """Polls predicates on the control block for one side (learner or collector).

    Args:
        block: the shared control block.
        side: ``"learner"`` or ``"collector"``; selects which state/progress words are ours.
        check_peer: called every check interval while waiting; raises PeerDied (or a more
            specific error) when the peer is gone.
        interrupt: called every check interval; raises to abandon the wait (cancellation,
            stop request) or returns normally.
        stale_after_s: watchdog period (docs/contracts.md §shutdown: 30 s).
        yield_while_spinning: release the GIL on every spin (the peer is a thread of this
            process: a plain spin would hold the GIL it needs for up to the switch interval).
    """

    def __init__(
        self,
        block: ControlBlock,
        *,
        side: str,
        check_peer: Callable[[], None],
        interrupt: Callable[[], None] | None = None,
        stale_after_s: float = STALE_AFTER_S,
        yield_while_spinning: bool = False,
    ) -> None:
        if side == "learner":
            self._my_state, self._peer_state = Word.LEARNER_STATE, Word.COLLECTOR_STATE
            self._peer_progress = Word.COLLECTOR_PROGRESS
        elif side == "collector":
            self._my_state, self._peer_state = Word.COLLECTOR_STATE, Word.LEARNER_STATE
            self._peer_progress = Word.LEARNER_PROGRESS
        else:
            raise ValueError(f"side={side!r} must be 'learner' or 'collector'")
        self._ints = block.ints
        self._check_peer = check_peer
        self._interrupt = interrupt
        self._stale_after_s = stale_after_s
        self._yield = yield_while_spinning
        self.side = side
        self.wait_s = 0.0  # cumulative seconds spent waiting (timings)

    def wait(
        self,
        predicate: Callable[[], bool],
        what: str,
        *,
        on_idle: Callable[[], bool] | None = None,
        spin_s: float = SPIN_S,
    ) -> None:
        """Return once ``predicate()`` is true.

        Args:
            predicate: cheap check on control words.
            what: names the awaited event in a StaleTick message.
            on_idle: optional work to do while waiting (the learner commits replay chunks
                here); returns True when it did something, which restarts the spin.
            spin_s: how long to spin before sleeping; longer for waits known to be short
                (the collector's wait for an action is one policy forward).

        Raises:
            StaleTick: the peer waited without progress for ``stale_after_s``.
            PeerDied: from ``check_peer``.
            Any exception ``interrupt`` raises.
        """
        if predicate():
            return
        ints = self._ints
        start = time.perf_counter()
        ints[self._my_state] = State.WAITING
        try:
            spin_until = start + spin_s
            sleep_s = 10e-6
            next_check = start + CHECK_INTERVAL_S
            peer_progress = int(ints[self._peer_progress])
            stale_since: float | None = None
            while True:
                if predicate():
                    return
                if on_idle is not None and on_idle():
                    now = time.perf_counter()
                    spin_until = now + spin_s
                    sleep_s = 10e-6
                    continue
                now = time.perf_counter()
                if now >= next_check:
                    next_check = now + CHECK_INTERVAL_S
                    if self._interrupt is not None:
                        self._interrupt()
                    self._check_peer()
                    progress = int(ints[self._peer_progress])
                    if progress != peer_progress or ints[self._peer_state] != State.WAITING:
                        peer_progress = progress
                        stale_since = None
                    elif stale_since is None:
                        stale_since = now
                    elif now - stale_since >= self._stale_after_s:
                        raise StaleTick(
                            f"{self.side} waited for {what} while the peer waited without progress "
                            f"for {now - stale_since:.1f} s (watchdog {self._stale_after_s:g} s)"
                        )
                if now < spin_until:
                    if self._yield:
                        time.sleep(0)  # releases the GIL: the peer thread runs meanwhile
                    continue
                time.sleep(sleep_s)
                sleep_s = min(sleep_s * 2, MAX_SLEEP_S)
        finally:
            ints[self._my_state] = State.BUSY
            self.wait_s += time.perf_counter() - start


def make_identity_check(pid: int, start_ticks: int, *, every_s: float = 0.5) -> Callable[[], None]:
    """A ``check_peer`` for the collector: raise PeerDied once the learner's identity is gone.

    /proc is read at most every ``every_s`` seconds (the wait loop calls this more often).
    """
    last = [0.0]

    def check() -> None:
        now = time.monotonic()
        if now - last[0] < every_s:
            return
        last[0] = now
        if not procfs.is_same_process(pid, start_ticks):
            raise PeerDied(f"learner process {pid} (start ticks {start_ticks}) is gone")

    return check
