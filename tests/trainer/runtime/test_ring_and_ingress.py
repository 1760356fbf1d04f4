"""Counter semantics of the inference ring, the replay ingress and the waiter (CPU)."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from trainer.runtime.control import ControlBlock, FailureKind, State, Word
from trainer.runtime.inference_ring import InferenceRing
from trainer.runtime.liveness import PeerDied, StaleTick, StopRequested, Waiter, make_identity_check
from trainer.runtime.replay_ingress import ReplayIngress


def _ring(capacity: int = 1, n: int = 4) -> InferenceRing:
    return InferenceRing(
        capacity=capacity, num_envs=n, obs_dim=3, critic_obs_dim=2, action_dim=2, device="cpu"
    )


def _ingress(depth: int = 2, slot_rows: int = 4, n: int = 4) -> ReplayIngress:
    return ReplayIngress(depth=depth, slot_rows=slot_rows, num_envs=n, device="cpu", row_width=5)


def _waiter(block: ControlBlock, side: str = "collector", **kw) -> Waiter:
    def interrupt() -> None:
        if block.ints[Word.STOP]:
            raise StopRequested("stop")

    return Waiter(block, side=side, check_peer=lambda: None, interrupt=interrupt, **kw)


def test_one_tick_round_trip_moves_every_flight_counter_once():
    block, ring = ControlBlock.create(), _ring()
    obs = torch.arange(12.0).reshape(4, 3)
    ring.publish_observation(
        block, 0, obs, torch.zeros(4, 2), torch.tensor([True, False, False, True])
    )
    flight = ring.flight(block)
    assert (flight.queue_depth, flight.publication_lag, flight.action_backlog) == (1, 1, 0)
    seen_obs, _, seen_done = ring.observe(block, 0)
    assert torch.equal(seen_obs, obs) and seen_done.tolist() == [True, False, False, True]
    assert ring.flight(block).queue_depth == 0
    ring.publish_action(block, 0, torch.ones(4, 2))
    assert ring.flight(block).action_backlog == 1
    out = torch.zeros(4, 2)
    ring.consume_action(block, 0, out)
    assert torch.equal(out, torch.ones(4, 2))
    flight = ring.flight(block)
    assert (flight.queue_depth, flight.publication_lag, flight.action_backlog) == (0, 0, 0)
    snap = ring.snapshot(block)
    assert snap["published_tick"] == snap["consumed_tick"] == 1 and snap["closed"] is False
    assert ring.ipc_event_count == 0  # CPU ring: no CUDA events


def test_ring_slots_rotate_with_capacity():
    block, ring = ControlBlock.create(), _ring(capacity=2)
    for tick in range(3):
        ring.publish_observation(
            block,
            tick,
            torch.full((4, 3), float(tick)),
            torch.zeros(4, 2),
            torch.zeros(4, dtype=torch.bool),
        )
    assert ring.obs[0, 0, 0].item() == 2.0 and ring.obs[1, 0, 0].item() == 1.0


def test_ingress_publish_release_and_high_water():
    block, ingress = ControlBlock.create(), _ingress(depth=2)
    committed: list[float] = []
    for value in (1.0, 2.0):
        assert ingress.push(block, torch.full((4, 5), value), None)
    snap = ingress.snapshot(block)
    assert (
        snap["published_sequence"],
        snap["release_sequence"],
        snap["occupancy"],
        snap["high_water_occupancy"],
    ) == (2, 0, 2, 2)
    while ingress.commit_next(block, lambda rows: committed.append(rows[0, 0].item())):
        pass
    assert committed == [1.0, 2.0]  # sequence order
    snap = ingress.snapshot(block)
    assert (
        snap["occupancy"] == 0
        and snap["release_sequence"] == 2
        and snap["high_water_occupancy"] == 2
    )
    assert snap["early_returns"] == snap["dropped_batches"] == 0


def test_full_ingress_waits_for_a_release_and_counts_backpressure():
    block, ingress = ControlBlock.create(), _ingress(depth=1)
    assert ingress.push(block, torch.full((4, 5), 1.0), None)

    def release_later() -> None:
        time.sleep(0.1)
        ingress.commit_next(block, lambda rows: None)

    thread = threading.Thread(target=release_later)
    thread.start()
    assert ingress.push(block, torch.full((4, 5), 2.0), _waiter(block))
    thread.join()
    snap = ingress.snapshot(block)
    assert snap["backpressure_waits"] == 1 and snap["backpressure_wait_s"] > 0
    assert (
        snap["published_sequence"] == 2
        and snap["occupancy"] == 1
        and snap["high_water_occupancy"] == 1
    )
    assert snap["early_returns"] == 0


def test_push_into_closed_ingress_is_a_closed_return_and_a_dropped_batch():
    block, ingress = ControlBlock.create(), _ingress()
    block.set(Word.CLOSED, 1)
    assert not ingress.push(block, torch.zeros(4, 5), None)
    snap = ingress.snapshot(block)
    assert (
        snap["closed_returns"],
        snap["stop_returns"],
        snap["early_returns"],
        snap["dropped_batches"],
    ) == (1, 0, 1, 1)
    assert snap["published_sequence"] == 0


def test_stop_while_waiting_for_space_is_a_stop_return():
    block, ingress = ControlBlock.create(), _ingress(depth=1)
    assert ingress.push(block, torch.zeros(4, 5), None)
    timer = threading.Timer(0.1, lambda: block.set(Word.STOP, 1))
    timer.start()
    assert not ingress.push(block, torch.zeros(4, 5), _waiter(block))
    timer.join()
    snap = ingress.snapshot(block)
    assert (
        snap["stop_returns"],
        snap["closed_returns"],
        snap["early_returns"],
        snap["dropped_batches"],
    ) == (1, 0, 1, 1)
    assert snap["backpressure_waits"] == 1 and snap["published_sequence"] == 1


def test_slot_rows_must_divide_num_envs():
    with pytest.raises(ValueError, match="must divide algo.num_envs=8"):
        ReplayIngress(depth=2, slot_rows=3, num_envs=8, device="cpu", row_width=5)


def test_waiter_times_out_only_when_the_peer_waits_without_progress():
    block = ControlBlock.create()
    block.set(Word.COLLECTOR_STATE, State.BUSY)
    waiter = _waiter(block, side="learner", stale_after_s=0.2)
    # A busy peer (compiling, capturing) is never timed out.
    timer = threading.Timer(0.5, lambda: block.set(Word.PUBLISHED_TICK, 1))
    timer.start()
    waiter.wait(lambda: block.ints[Word.PUBLISHED_TICK] >= 1, "tick 0")
    timer.join()
    # A waiting peer that makes no progress is a stale tick.
    block.set(Word.COLLECTOR_STATE, State.WAITING)
    with pytest.raises(StaleTick, match="without progress"):
        waiter.wait(lambda: False, "never")
    assert block.get(Word.LEARNER_STATE) == State.BUSY


def test_waiter_keeps_waiting_while_the_waiting_peer_makes_progress():
    block = ControlBlock.create()
    block.set(Word.COLLECTOR_STATE, State.WAITING)
    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.is_set():
            block.add(Word.COLLECTOR_PROGRESS)
            time.sleep(0.02)

    thread = threading.Thread(target=heartbeat)
    thread.start()
    timer = threading.Timer(0.6, lambda: block.set(Word.PUBLISHED_TICK, 1))
    timer.start()
    try:
        _waiter(block, side="learner", stale_after_s=0.2).wait(
            lambda: block.ints[Word.PUBLISHED_TICK] >= 1, "tick 0"
        )
    finally:
        stop.set()
        thread.join()
        timer.join()


def test_waiter_reports_a_dead_peer():
    block = ControlBlock.create()

    def check_peer() -> None:
        raise PeerDied("gone")

    with pytest.raises(PeerDied):
        Waiter(block, side="collector", check_peer=check_peer).wait(lambda: False, "never")


def test_identity_check_detects_a_reused_or_dead_pid():
    import os

    from contracts import procfs

    me = os.getpid()
    make_identity_check(me, procfs.start_time_ticks(me), every_s=0.0)()  # alive: no error
    with pytest.raises(PeerDied):
        make_identity_check(me, procfs.start_time_ticks(me) + 1, every_s=0.0)()


def test_control_block_survives_pickling_and_shares_memory():
    import pickle
    from multiprocessing.reduction import ForkingPickler

    import torch.multiprocessing  # noqa: F401 - registers torch's shared-memory reductions

    block = ControlBlock.create()
    copy = pickle.loads(ForkingPickler.dumps(block))
    copy.set(Word.PUBLISHED_TICK, 7)
    assert block.get(Word.PUBLISHED_TICK) == 7
    copy.write_error(FailureKind.BACKEND, "BackendError\nboom")
    assert block.read_error() == (FailureKind.BACKEND, "BackendError\nboom")


@pytest.mark.parametrize(
    ("error", "classification"),
    [
        pytest.param(StaleTick("x"), "timeout/stale_tick", id="stale"),
        pytest.param(KeyboardInterrupt(), "external_cancellation", id="keyboard"),
        pytest.param(ValueError("x"), "learner_failure", id="learner"),
    ],
)
def test_exceptions_map_to_shutdown_classifications(error, classification):
    from trainer.runtime.shutdown import classify_exception

    assert classify_exception(error) == classification


def test_collector_exit_names_the_signal():
    from trainer.runtime.shutdown import collector_exit

    assert collector_exit(False, -9) == {
        "alive": False,
        "exitcode": -9,
        "signal": 9,
        "signal_name": "SIGKILL",
    }
    assert collector_exit(False, 1)["signal"] is None


def test_shutdown_snapshot_failure_becomes_a_cleanup_error_not_a_new_failure():
    from trainer.runtime.shutdown import ShutdownTracker

    tracker = ShutdownTracker()
    tracker.enter("startup/collector_start")

    def broken() -> dict:
        raise OSError("shm gone")

    assert tracker.best_effort("ring snapshot", broken) is None
    record = tracker.record(classification="collector_failure")
    assert record["owner"] == "collector" and record["phase"] == "startup/collector_start"
    assert record["cleanup"]["errors"] == [
        {"type": "OSError", "message": "ring snapshot: shm gone"}
    ]
    with pytest.raises(ValueError, match="unknown shutdown phase"):
        tracker.enter("training/bogus")
