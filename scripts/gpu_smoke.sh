#!/usr/bin/env bash
# The GPU smoke in one device call (docs/benchmarks.md "GPU smoke"): the probe's canonical
# command, the null and MPS soaks at 1024 envs x 2,000 iterations with extract-metrics on
# each, and pytest -m gpu; one summary table last; exit 1 if any step failed.
#
#   scripts/gpu_smoke.sh [--out DIR] [--skip probe|null|mps|pytest] [--json]
#
# Logs go to --out, else $OUT, else a new temp dir. Every tool runs as `$PYTHON -m ...`
# from the repository root, so no console script is needed: PYTHON defaults to `python`
# (the system Python on the GPU machine; `uv run scripts/gpu_smoke.sh` in a checkout).
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python}" -m harness.smoke "$@"
