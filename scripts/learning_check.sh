#!/usr/bin/env bash
# The canonical learning check on one GPU (docs/benchmarks.md "Learning check"): canonical
# soaks (1024 envs x 65,000 iterations under CUDA MPS, in-run evaluation at every
# checkpoint) on the two built-in clips, then a table of their verdicts and evaluations.
#
#   scripts/learning_check.sh start DIR [CLIP ...]   # launch in the background, return at once
#   scripts/learning_check.sh wait DIR [SECONDS]     # wait up to SECONDS (default 540) for the end
#   scripts/learning_check.sh table DIR              # the table, also as DIR/learning_check.json
#
# CLIP is a g1-soak --motion value (default: synthetic march). The soaks run at the same
# time under one MPS daemon, so their env steps/s are not solo figures. Env: PYTHON
# (default python), ITERATIONS (65000), NUM_ENVS (1024), SAVE_INTERVAL (5000),
# EXTRA_OVERRIDES (space-separated KEY=VALUE passed to the trainer).
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python}
verb=${1:?usage: learning_check.sh start|wait|table DIR ...}
dir=${2:?usage: learning_check.sh start|wait|table DIR ...}
shift 2

start() {
  local clips=("$@")
  [ ${#clips[@]} -gt 0 ] || clips=(synthetic march)
  mkdir -p "$dir"
  "$py" -m harness.mps.cli start >"$dir/cumps-start.log" 2>&1
  local overrides=(--extra-override training.cuda_process_sharing=mps
                   --extra-override "algo.save_interval=${SAVE_INTERVAL:-5000}")
  for kv in ${EXTRA_OVERRIDES:-}; do overrides+=(--extra-override "$kv"); done
  for clip in "${clips[@]}"; do
    local name; name=$(basename "$clip" .npz)
    setsid nohup "$py" -m harness.soak --sim mjwarp --motion "$clip" \
      --num-envs "${NUM_ENVS:-1024}" --iterations "${ITERATIONS:-65000}" \
      --min-duration-seconds 0 "${overrides[@]}" \
      --log-dir "$dir/$name/run" --output "$dir/$name/soak.json" \
      >"$dir/$name.log" 2>&1 </dev/null &
    echo "$name $!" >>"$dir/pids"
    echo "started $clip as pid $! (log $dir/$name.log)"
  done
}

wait_all() {
  local limit=${1:-540} waited=0
  while [ "$waited" -lt "$limit" ]; do
    local running=0
    while read -r _ pid; do kill -0 "$pid" 2>/dev/null && running=$((running + 1)); done <"$dir/pids"
    [ "$running" -eq 0 ] && { "$py" -m harness.mps.cli stop >>"$dir/cumps-stop.log" 2>&1 || true; return 0; }
    sleep 10; waited=$((waited + 10))
  done
  echo "still running after ${limit} s:"; tail -n 2 "$dir"/*.log
}

table() {
  "$py" - "$dir" <<'EOF'
import json, sys
from pathlib import Path

root = Path(sys.argv[1])
rows = []
for soak in sorted(root.glob("*/soak.json")):
    doc = json.loads(soak.read_text())
    summary_path = soak.parent / "run" / "run_summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    ev_path = soak.parent / "run" / "evaluation.json"
    ev = json.loads(ev_path.read_text()) if ev_path.is_file() else {"points": []}
    for point in ev["points"]:
        u, f = point["modes"]["uniform"], point["modes"]["frame0"]
        rows.append({
            "clip": soak.parent.name, "iteration": point["iteration"], "source": point["source"],
            "uniform_success": u["success_rate"], "frame0_success": f["success_rate"],
            "mpkpe_mm": u["mpkpe_mm"], "r_mpkpe_mm": u["r_mpkpe_mm"],
            "joint_rad": u["joint_pos_error_rad"], "eval_s": point["eval_wall_time_s"],
        })
    learning = doc.get("learning") or {}
    verdict = learning.get("verdict", "absent")
    if learning.get("reason"):
        verdict += f" ({learning['reason']})"
    failure = f" ({doc['failure_reason']})" if doc.get("failure_reason") else ""
    print(f"{soak.parent.name}: soak {doc.get('status')}{failure}; learning {verdict}; "
          f"env steps {summary.get('total_env_steps')}, wall {summary.get('wall_time_sec')} s, "
          f"steady {summary.get('steady_env_steps_per_sec')} env steps/s "
          f"(tail {summary.get('tail_env_steps_per_sec')})")
header = ["clip", "iteration", "source", "uniform_success", "frame0_success", "mpkpe_mm",
          "r_mpkpe_mm", "joint_rad", "eval_s"]
print("| " + " | ".join(header) + " |")
print("|" + "---|" * len(header))
for row in rows:
    cells = [f"{row[k]:.4g}" if isinstance(row[k], float) else str(row[k]) for k in header]
    print("| " + " | ".join(cells) + " |")
(root / "learning_check.json").write_text(json.dumps(rows, indent=1) + "\n")
EOF
}

case "$verb" in
  start) start "$@" ;;
  wait) wait_all "$@" ;;
  table) table ;;
  *) echo "usage: learning_check.sh start|wait|table DIR ..." >&2; exit 2 ;;
esac
