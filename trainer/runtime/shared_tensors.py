"""The tensors the learner shares with the collector, and the order they are released in.

The learner allocates the inference ring (observations, critic observations, done flags,
actions) and the replay-ingress slots, and sends them to the collector through the spawn
pipe. On the GPU this makes the learner the CUDA IPC *producer* of those five storages and
the collector their *consumer*. For every storage it shares, torch keeps a counter in a
shared-memory file that the producer owns. The consumer decrements the counter when its
copy of the storage is freed. When the producer process exits, torch prints "Producer
process has been terminated before all shared CUDA tensors released" if any shared
storage is still alive in the producer, or if a counter is still above zero because a
consumer never freed its copy.

So a run ends clean only in this order (docs/runtime.md "Shutdown"):

1. The collector synchronises its device, frees its copies (its CUDA IPC deleters
   decrement the counters) and acknowledges with ``SHARED_RELEASED``, naming in its
   diagnostics text any copy that is still alive.
2. The learner waits for the collector's exit, then frees its own storages.
3. The learner calls ``torch.cuda.ipc_collect()``, so torch frees the storages whose
   counters are now zero.

``StorageWatch`` checks each side, so that a storage still alive after its owner released
it is reported by name, not only by torch's unnamed warning at exit.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

import torch
from torch.multiprocessing.reductions import StorageWeakRef

if TYPE_CHECKING:
    from trainer.runtime.inference_ring import InferenceRing
    from trainer.runtime.replay_ingress import ReplayIngress

HELD_KEY = "shared_tensors_held"
"""Key of the collector's diagnostics text: the shared tensors still alive after its release."""
TORCH_WARNING = "Producer process has been terminated before all shared CUDA tensors released"
"""What torch prints at the learner's exit when a shared CUDA storage was not released."""


def shared_tensors(ring: InferenceRing, ingress: ReplayIngress) -> dict[str, torch.Tensor]:
    """The shared tensors by name (``ring.obs`` ... ``ingress.slots``)."""
    return {
        "ring.obs": ring.obs,
        "ring.critic_obs": ring.critic_obs,
        "ring.done": ring.done,
        "ring.actions": ring.actions,
        "ingress.slots": ingress.slots,
    }


def release_all(ring: InferenceRing, ingress: ReplayIngress) -> None:
    """Drop the ring's and the ingress's references to their shared tensors."""
    ring.release_tensors()
    ingress.release_tensors()


class StorageWatch:
    """Weak references to the storages of named tensors; says which are still alive.

    A weak reference does not keep the memory alive: the storage is freed, and its CUDA
    IPC deleter runs, as soon as the last strong reference goes.
    """

    def __init__(self, tensors: Mapping[str, torch.Tensor]) -> None:
        self._refs = {
            name: StorageWeakRef(tensor.untyped_storage()) for name, tensor in tensors.items()
        }

    def alive(self) -> list[str]:
        """Names whose storage is still referenced somewhere in this process."""
        return [name for name, ref in self._refs.items() if not ref.expired()]


def release(
    drop: Callable[[], None], watch: StorageWatch, devices: Iterable[torch.device]
) -> list[str]:
    """Free this process's references to the shared tensors; return the names still alive.

    The CUDA ``devices`` are synchronised first, so no queued kernel still reads or writes
    the memory once it is handed back. ``drop`` removes the references this process knows
    about. The garbage collector then frees those held only by reference cycles.
    """
    for device in {torch.device(d) for d in devices}:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    drop()
    gc.collect()
    return watch.alive()


def release_learner_side(
    watch: StorageWatch,
    ring: InferenceRing,
    ingress: ReplayIngress,
    devices: tuple[torch.device, torch.device],
    collector_problems: list[str],
) -> list[str]:
    """Steps 2 and 3 above, once the collector has exited; return every problem.

    ``devices`` are the learner's and the collector's; ``collector_problems`` says what the
    collector left referenced (its release report). Each problem names what stayed
    referenced, so torch's unnamed warning at exit never comes unexplained.
    """
    problems = list(collector_problems)
    held = release(lambda: release_all(ring, ingress), watch, devices)
    if devices[1].type == "cuda":
        torch.cuda.ipc_collect()
    if held:
        problems.append(f"the learner still referenced {', '.join(held)} after freeing them")
    if problems and ring.is_device_ring:
        problems = [f"{p}; torch reports this at exit as '{TORCH_WARNING}'" for p in problems]
    return problems
