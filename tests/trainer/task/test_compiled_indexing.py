"""No compiled phase of the env gathers along a 3-vector axis.

``torch.linalg.cross`` decomposes (inductor's decomposition table) into ``index_select`` with
the index tensors ``(arange(3) + k) % 3``. On CUDA, where inductor fused the product into the
reset's ``qvel`` concatenation, those became indirect loads with a device-side bounds assert
that failed while the env compiled (``triton_poi_fused_add_cat_linalg_cross_...``). The task
math writes the cross product per component instead; this test lowers every compiled phase
the way inductor does (dynamo, then AOT with inductor's decompositions) on CPU and checks
that no gather over a size-3 axis is left in any of them.
"""

from __future__ import annotations

import pytest
import torch
from functorch.compile import make_boxed_func
from torch._functorch.aot_autograd import aot_module_simplified
from torch._inductor.decomposition import select_decomp_table

from trainer.task.math import cross, quat_apply, quat_apply_inverse

aten = torch.ops.aten
_GATHERS = (aten.index_select.default, aten.gather.default, aten.index.Tensor)


def _lowered(fn, *args) -> tuple[list[torch.fx.GraphModule], object]:
    """The ATen graphs inductor would get for ``fn(*args)`` (after its decompositions) and
    the result of the call (run once, through those graphs)."""
    graphs: list[torch.fx.GraphModule] = []

    def record(gm: torch.fx.GraphModule, _inputs):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    def backend(gm, example_inputs):
        return aot_module_simplified(
            gm, example_inputs, fw_compiler=record, decompositions=select_decomp_table()
        )

    torch._dynamo.reset()
    out = torch.compile(fn, backend=backend, dynamic=False)(*args)
    return graphs, out


def _gathers_over_size3(gm: torch.fx.GraphModule) -> list[str]:
    """Nodes that index a size-3 axis with an index tensor (index_select, index, gather)."""
    found = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in _GATHERS:
            continue
        src = node.args[0].meta["val"]
        if node.target in (aten.index_select.default, aten.gather.default):
            dim = node.args[1] % src.dim()
            if src.shape[dim] == 3:
                found.append(node.format_node())
        elif node.target is aten.index.Tensor:
            dims = [d for d, i in enumerate(node.args[1]) if i is not None]
            if any(src.shape[d] == 3 for d in dims):
                found.append(node.format_node())
    return found


def test_cross_matches_linalg_cross_and_broadcasts():
    gen = torch.Generator().manual_seed(3)
    a, b = torch.randn(5, 4, 3, generator=gen), torch.randn(1, 4, 3, generator=gen)
    expected = torch.linalg.cross(a, b.expand_as(a), dim=-1)
    torch.testing.assert_close(cross(a, b), expected)


def test_rotations_lower_without_gathers():
    gen = torch.Generator().manual_seed(4)
    q = torch.nn.functional.normalize(torch.randn(6, 4, generator=gen), dim=-1)
    v = torch.randn(6, 3, generator=gen)
    for fn in (quat_apply, quat_apply_inverse):
        graphs, out = _lowered(fn, q, v)
        torch.testing.assert_close(out, fn(q, v))
        assert [g for gm in graphs for g in _gathers_over_size3(gm)] == [], fn.__name__


@pytest.mark.slow  # compiles every phase of the env step
def test_no_compiled_phase_gathers_over_a_3_vector_axis(make_g1_env):
    env = make_g1_env(num_envs=3, num_threads=1, compile_backend=None)
    graphs: dict[str, list[torch.fx.GraphModule]] = {}
    cores = env.phase_cores()  # what torch.compile compiles
    for name, core in cores.items():

        def capture(*args, _name=name, _core=core):
            graphs[_name], out = _lowered(_core, *args)
            env._fns[_name] = _core  # later calls run eagerly
            return out

        env._fns[name] = capture
    try:
        env.reset_all()
        env.step(torch.zeros(3, 29))
    finally:
        torch._dynamo.reset()  # later tests compile these functions with their own backend
    assert set(graphs) == set(cores)
    offending = {
        name: [g for gm in gms for g in _gathers_over_size3(gm)] for name, gms in graphs.items()
    }
    assert {k: v for k, v in offending.items() if v} == {}
