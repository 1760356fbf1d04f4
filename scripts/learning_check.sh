#!/usr/bin/env bash
# The canonical learning check on one GPU (docs/benchmarks.md "Learning check"): canonical
# soaks (1024 envs x 65,000 iterations under CUDA MPS, every checkpoint evaluated after
# training) on the two built-in clips, then a table of their verdicts and evaluations.
#
#   scripts/learning_check.sh start DIR [CLIP ...]   # launch in the background, return at once
#   scripts/learning_check.sh wait DIR [SECONDS]     # wait up to SECONDS (default 540) for the end
#   scripts/learning_check.sh table DIR              # the table, also as DIR/learning_check.json
#
# CLIP is a g1-soak --motion value (default: synthetic march). The soaks run at the same
# time under one MPS daemon, so their env steps/s are not solo figures. Env: PYTHON
# (default python), ITERATIONS (65000), NUM_ENVS (1024), SAVE_INTERVAL (5000),
# EXTRA_OVERRIDES (space-separated KEY=VALUE passed to the trainer), CANDIDATE
# (space-separated KEY=VALUE: each clip also runs as CLIP+candidate with these on top, the
# baseline beside the candidate under the same daemon, as a change to the recipe is judged at
# the full budget). Every soak's --check-only runs first; one that fails starts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python}
verb=${1:?usage: learning_check.sh start|wait|table DIR ...}
dir=${2:?usage: learning_check.sh start|wait|table DIR ...}
shift 2

soak_args() {  # soak_args CLIP NAME OVERRIDE...: the g1-soak arguments of one soak
  local clip=$1 name=$2; shift 2
  printf '%s\n' --sim mjwarp --motion "$clip" --num-envs "${NUM_ENVS:-1024}" \
    --iterations "${ITERATIONS:-65000}" --min-duration-seconds 0 "$@" \
    --log-dir "$dir/$name/run" --output "$dir/$name/soak.json"
}

start() {
  local clips=("$@")
  [ ${#clips[@]} -gt 0 ] || clips=(synthetic march)
  local overrides=(--extra-override training.cuda_process_sharing=mps
                   --extra-override "algo.save_interval=${SAVE_INTERVAL:-5000}")
  for kv in ${EXTRA_OVERRIDES:-}; do overrides+=(--extra-override "$kv"); done
  local candidate=()
  for kv in ${CANDIDATE:-}; do candidate+=(--extra-override "$kv"); done
  local soaks=()  # "NAME<TAB>CLIP<TAB>candidate?" per soak, baseline first
  for clip in "${clips[@]}"; do
    local name; name=$(basename "$clip" .npz); name=${name//:/-}
    soaks+=("$name	$clip	")
    [ ${#candidate[@]} -eq 0 ] || soaks+=("$name+candidate	$clip	yes")
  done
  # Every soak's pre-launch check passes before the daemon or any soak starts.
  local entry name clip cand args
  for entry in "${soaks[@]}"; do
    IFS=$'\t' read -r name clip cand <<<"$entry"
    mapfile -t args < <(soak_args "$clip" "$name" "${overrides[@]}" ${cand:+"${candidate[@]}"})
    "$py" -m harness.soak "${args[@]}" --check-only >/dev/null || {
      echo "learning_check: the soak '$name' failed its pre-launch check (above); nothing started" >&2
      exit 2
    }
  done
  mkdir -p "$dir"
  "$py" -m harness.mps.cli start >"$dir/cumps-start.log" 2>&1
  for entry in "${soaks[@]}"; do
    IFS=$'\t' read -r name clip cand <<<"$entry"
    mapfile -t args < <(soak_args "$clip" "$name" "${overrides[@]}" ${cand:+"${candidate[@]}"})
    setsid nohup "$py" -m harness.soak "${args[@]}" >"$dir/$name.log" 2>&1 </dev/null &
    echo "$name $!" >>"$dir/pids"
    echo "started $name ($clip) as pid $! (log $dir/$name.log)"
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
