"""The multi-kernel warm-cache failure in three processes (the journal entry of 2026-12-08).

A compiled layer norm and log-softmax with inductor's multi-kernel and combo kernels, backward
included. Run with one inductor cache directory, in order:

    export TORCHINDUCTOR_CACHE_DIR=/tmp/ic
    python mk_repro.py cold; python mk_repro.py warm; python mk_repro.py fix

``warm`` fails on torch 2.11 (a multi-kernel read from the warm cache hashes a sub-kernel whose
lock was stripped for pickling); ``fix`` sets TORCHINDUCTOR_DISABLE_MULTI_KERNEL_CACHE=1 first,
as the learner does (trainer/compile_mode.py), and completes.
"""

import os
import sys
import time

if len(sys.argv) > 1 and sys.argv[1] == "fix":
    os.environ["TORCHINDUCTOR_DISABLE_MULTI_KERNEL_CACHE"] = "1"

import torch
import torch._inductor.config as inductor_config
from torch._dynamo.exc import BackendCompilerFailed

inductor_config.compile_threads = 1


def layer(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = torch.nn.functional.layer_norm(x @ w, (x.shape[-1],))
    return torch.log_softmax(h, -1) * h.pow(2).sum(-1, keepdim=True).rsqrt()


def main() -> None:
    options = {"triton.multi_kernel": 1, "combo_kernels": True}
    compiled = torch.compile(layer, options=options, fullgraph=True, dynamic=False)
    x = torch.randn(4096, 1024, device="cuda", requires_grad=True)
    w = torch.randn(1024, 1024, device="cuda")
    start = time.time()
    try:
        y = compiled(x, w)
        y.sum().backward()
        torch.cuda.synchronize()
        print(
            sys.argv[1:],
            "ok",
            round(float(y.detach().double().sum()), 3),
            f"{time.time() - start:.1f}s",
        )
    except BackendCompilerFailed as err:  # the failure is the finding: print it, go on
        print(sys.argv[1:], "FAILED", type(err).__name__, str(err)[:300].replace("\n", " "))


if __name__ == "__main__":
    main()
