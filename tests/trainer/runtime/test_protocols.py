"""The runtime's seams (trainer/runtime/protocols.py): the real learner and backends, and the
test doubles every runtime test drives, carry every member the runtime calls."""

from __future__ import annotations

import g1soak_runtime_fakes as fakes
import torch

from tests.trainer.algo.learner_builders import make_learner
from trainer.runtime.protocols import EnvBackend, Learner, TrainingEnv
from trainer.sim.mjwarp import MjWarpBackend


def test_the_flashsac_learner_is_a_runtime_learner() -> None:
    assert isinstance(make_learner(), Learner)


def test_the_runtime_doubles_honour_the_protocols() -> None:
    env = fakes.FakeEnv(4, "cpu")
    assert isinstance(env, TrainingEnv) and isinstance(env.backend, EnvBackend)
    assert isinstance(fakes.FakeLearner(4, torch.device("cpu")), Learner)


def test_the_mjwarp_backend_has_no_physics_pool_and_closes_as_a_no_op() -> None:
    # The collector reads num_threads into the manifest and calls close() on every backend.
    assert MjWarpBackend.num_threads is None
    assert MjWarpBackend.close(object.__new__(MjWarpBackend)) is None
