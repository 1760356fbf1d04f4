"""The shared control block: sequence counters the learner and the collector poll.

The learner allocates one small CPU shared-memory block before it spawns the collector and
hands it over at spawn (a collector thread shares the same block as plain memory). Every word has exactly one writer (named in ``Word``), so plain
aligned int64 stores are enough: x86-64 keeps stores in program order, and a reader that
sees a counter advance also sees the data written before it (CPU ring) or the CUDA event
recorded before it (device ring, where the event orders the GPU work).

Words are read and written through a NumPy view of the shared tensor, which costs ~100 ns
per access instead of the ~2 µs of a torch scalar index: at 100k env steps/s one tick is
~10 ms and both sides poll these words in their hot loops.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np
import torch


class Word(IntEnum):
    """Control-block word indices; the comment names the only writer."""

    EPOCH = 0  # learner: inference epoch (1 once the ring is live)
    CLOSED = 1  # learner: 1 = ring and ingress closed, collector must stop
    PUBLISHED_TICK = 2  # collector: observation ticks published
    OBSERVED_TICK = 3  # learner: observation ticks read
    ACTION_TICK = 4  # learner: action ticks published
    CONSUMED_TICK = 5  # collector: action ticks consumed
    INGRESS_PUBLISHED = 6  # collector: replay chunks published
    INGRESS_RELEASED = 7  # learner: replay chunks committed and released
    INGRESS_HIGH_WATER = 8  # collector: max occupancy seen at publication
    INGRESS_BP_WAITS = 9  # collector: pushes that found the ingress full
    INGRESS_BP_WAIT_NS = 10  # collector: cumulative backpressure wait, ns
    INGRESS_CLOSED_RETURNS = 11  # collector: pushes refused because the ingress was closed
    INGRESS_STOP_RETURNS = 12  # collector: pushes abandoned because a stop was requested
    COLLECTOR_STATE = 13  # collector: State
    LEARNER_STATE = 14  # learner: State
    COLLECTOR_PROGRESS = 15  # collector: bumped on every publication (heartbeat)
    LEARNER_PROGRESS = 16  # learner: bumped on every publication (heartbeat)
    COLLECTOR_READY = 17  # collector: 1 once the env is built and tick 0 can follow
    COLLECTOR_DONE = 18  # collector: 1 after its last tick and final metrics report
    COLLECTOR_FAILURE = 19  # collector: FailureKind of an exception it caught
    STOP = 20  # learner: 1 = stop requested (finish or abort)
    METRICS_SEQ = 21  # collector: seqlock of the metrics report (odd while writing)
    METRICS_REPORTS = 22  # collector: number of complete metrics reports
    TEXT_LEN = 23  # collector: bytes used in the text area (diagnostics JSON)
    ERROR_LEN = 24  # collector: bytes used in the error area
    COLLECTOR_PID = 25  # collector: its own pid
    SHARED_RELEASED = 26  # collector: 1 once it freed its copies of the shared tensors
    EVAL_REQUEST = 27  # learner: the final iteration once every checkpoint is on disk
    EVAL_DONE = 28  # collector: 1 once the evaluation's outcome is in the text area
    TICK_LIMIT = 29  # learner: ticks of this run; lowered once when the time budget ends it
    ENV_BUILT = (
        30  # collector: 1 once its env is built (a thread collector's learner captures after)
    )


NUM_WORDS = 32
TEXT_BYTES = 65536
ERROR_BYTES = 16384
METRICS_SLOTS = 256


class State(IntEnum):
    """What a side is doing, for the stalled-peer watchdog (liveness.py)."""

    BUSY = 0
    WAITING = 1
    FINISHED = 2


class FailureKind(IntEnum):
    """Exception class caught in the collector (docs/contracts.md §shutdown)."""

    NONE = 0
    COLLECTOR = 1  # collector_failure
    BACKEND = 2  # backend_worker_failure


class ControlBlock:
    """Shared int64 words, a float64 metrics area and two byte areas (text, error).

    Built once by the learner with ``ControlBlock.create()``; pickling (spawn arguments)
    shares the same memory with the collector through torch's shared-memory reductions.
    """

    def __init__(
        self,
        ints: torch.Tensor,
        floats: torch.Tensor,
        text: torch.Tensor,
        error: torch.Tensor,
    ) -> None:
        self._tensors = (ints, floats, text, error)
        self.ints: np.ndarray = ints.numpy()  # [NUM_WORDS] int64
        self.floats: np.ndarray = floats.numpy()  # [METRICS_SLOTS] float64
        self._text: np.ndarray = text.numpy()  # [TEXT_BYTES] uint8
        self._error: np.ndarray = error.numpy()  # [ERROR_BYTES] uint8

    @classmethod
    def create(cls, *, shared: bool = True) -> ControlBlock:
        """``shared``: in shared memory for a collector process; False for a collector thread."""
        tensors = (
            torch.zeros(NUM_WORDS, dtype=torch.int64),
            torch.zeros(METRICS_SLOTS, dtype=torch.float64),
            torch.zeros(TEXT_BYTES, dtype=torch.uint8),
            torch.zeros(ERROR_BYTES, dtype=torch.uint8),
        )
        if shared:
            for tensor in tensors:
                tensor.share_memory_()
        return cls(*tensors)

    def __reduce__(self):
        return (ControlBlock, self._tensors)

    def get(self, word: Word) -> int:
        return int(self.ints[word])

    def set(self, word: Word, value: int) -> None:
        self.ints[word] = value

    def add(self, word: Word, delta: int = 1) -> int:
        """Increment a word this process owns; return the new value."""
        value = int(self.ints[word]) + delta
        self.ints[word] = value
        return value

    def write_text(self, text: str) -> None:
        """Publish a UTF-8 text (the collector's diagnostics JSON); truncated never silently."""
        data = text.encode("utf-8")
        if len(data) > TEXT_BYTES:
            raise ValueError(
                f"collector diagnostics text is {len(data)} bytes; the limit is {TEXT_BYTES}"
            )
        self._text[: len(data)] = np.frombuffer(data, dtype=np.uint8)
        self.set(Word.TEXT_LEN, len(data))

    def read_text(self) -> str:
        return bytes(self._text[: self.get(Word.TEXT_LEN)]).decode("utf-8", errors="replace")

    def write_error(self, kind: FailureKind, text: str) -> None:
        """Record a collector exception ``"<type>\\n<message>"``; the message is cut to fit."""
        data = text.encode("utf-8")[:ERROR_BYTES]
        self._error[: len(data)] = np.frombuffer(data, dtype=np.uint8)
        self.set(Word.ERROR_LEN, len(data))
        self.set(Word.COLLECTOR_FAILURE, int(kind))

    def read_error(self) -> tuple[FailureKind, str]:
        text = bytes(self._error[: self.get(Word.ERROR_LEN)]).decode("utf-8", errors="replace")
        return FailureKind(self.get(Word.COLLECTOR_FAILURE)), text
