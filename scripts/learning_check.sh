#!/usr/bin/env bash
# The canonical learning check on one GPU (docs/benchmarks.md "Learning check"): canonical
# soaks (1024 envs x 65,000 iterations under CUDA MPS, every checkpoint evaluated after
# training) on the two built-in clips, then a table of their verdicts and evaluations.
#
#   scripts/learning_check.sh start DIR [CLIP ...]   # launch in the background, return at once
#   scripts/learning_check.sh wait DIR [SECONDS]     # wait up to SECONDS (default 540) for the end
#   scripts/learning_check.sh table DIR              # the table, also as DIR/learning_check.json
#   scripts/learning_check.sh diagnostics DIR        # per clip, its soaks' decline diagnostics
#                                                    # overlaid: DIR/CLIP.diagnostics.{png,json}
#
# CLIP is a g1-soak --motion value (default: synthetic march). The soaks run at the same
# time under one MPS daemon, so their env steps/s are not solo figures. Env: PYTHON
# (default python), ITERATIONS (65000), NUM_ENVS (1024), SAVE_INTERVAL (5000),
# EXTRA_OVERRIDES (space-separated KEY=VALUE passed to the trainer), CANDIDATES
# ("NAME:KEY=VALUE ...;NAME:...": each clip also runs as CLIP+NAME with that set on top, the
# baseline beside the candidates under the same daemon, as a change to the recipe is judged
# at the full budget; CANDIDATE="KEY=VALUE ..." is one set named candidate). Every soak's
# --check-only runs first; one that fails starts nothing. So does a set of soaks whose GPU
# memory (SOAK_MIB each, default 32,300 MiB per 1024 envs, the peak of a canonical soak) is
# more than nvidia-smi says the GPU has free.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python}
verb=${1:?usage: learning_check.sh start|wait|table|diagnostics DIR ...}
dir=${2:?usage: learning_check.sh start|wait|table|diagnostics DIR ...}
shift 2

pairs() {  # pairs KEY=VALUE...: one --extra-override per pair, a word per line
  local kv
  for kv in "$@"; do printf -- '--extra-override\n%s\n' "$kv"; done
}

soak_argv() {  # soak_argv NAME CLIP [CANDIDATE]: one soak's g1-soak arguments, a word per line
  local name=$1 clip=$2 cand=${3:-}
  printf '%s\n' --sim mjwarp --motion "$clip" --num-envs "${NUM_ENVS:-1024}" \
    --iterations "${ITERATIONS:-65000}" --min-duration-seconds 0
  pairs training.cuda_process_sharing=mps "algo.save_interval=${SAVE_INTERVAL:-5000}" \
    ${EXTRA_OVERRIDES:-}
  [ -z "$cand" ] || pairs ${candidate[$cand]}  # after the shared ones, so its values win
  printf '%s\n' --log-dir "$dir/$name/run" --output "$dir/$name/soak.json"
}

fits_gpu() {  # fits_gpu N: N soaks' GPU memory fits what the soaks' GPU has free, else exit 2
  local n=$1 each total free gpu=${CUDA_VISIBLE_DEVICES:-0}
  each=${SOAK_MIB:-$((32300 * ${NUM_ENVS:-1024} / 1024))}
  gpu=${gpu%%,*}
  if ! free=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits -i "$gpu" 2>/dev/null | head -n 1) ||
    [[ ! "$free" =~ ^[0-9]+$ ]]; then
    echo "learning_check: cannot read GPU $gpu's free memory with nvidia-smi; the soaks need" \
      "a GPU: run this on the GPU machine; nothing started" >&2
    exit 2
  fi
  total=$((n * each))
  if [ "$total" -gt "$free" ]; then
    echo "learning_check: $n soak(s) need about $total MiB of GPU memory ($each each), GPU $gpu" \
      "has $free MiB free; run fewer clips or candidates (SOAK_MIB sets the per-soak figure);" \
      "nothing started" >&2
    exit 2
  fi
}

read_candidates() {  # fills candidate[NAME]="KEY=VALUE ..." and names (in order)
  local sets=${CANDIDATES:-${CANDIDATE:+candidate:$CANDIDATE}} spec cname specs
  [ -n "$sets" ] || return 0
  IFS=';' read -r -a specs <<<"$sets"
  for spec in "${specs[@]}"; do
    cname=${spec%%:*}
    if [[ "$spec" != *:* || ! "$cname" =~ ^[A-Za-z0-9_.-]+$ || -n "${candidate[$cname]+x}" ]]; then
      echo "learning_check: candidate '$spec' must read NAME:KEY=VALUE ... with a new NAME of" \
        "letters, digits, '.', '_' or '-'; nothing started" >&2
      exit 2
    fi
    candidate[$cname]=${spec#*:}
    names+=("$cname")
  done
}

start() {
  local clips=("$@")
  [ ${#clips[@]} -gt 0 ] || clips=(synthetic march)
  local -A candidate=()
  local names=()
  read_candidates
  # each soak's g1-soak arguments (a word per line) by its name, built once; baseline first
  local soaks=() clip name cname args
  local -A argv=() clip_of=()
  for clip in "${clips[@]}"; do
    name=$(basename "$clip" .npz)
    name=${name//:/-}
    for cname in "" "${names[@]}"; do
      soaks+=("$name${cname:++$cname}")
      argv[${soaks[-1]}]=$(soak_argv "${soaks[-1]}" "$clip" "$cname")
      clip_of[${soaks[-1]}]=$clip
    done
  done
  # Every soak's pre-launch check passes before the daemon or any soak starts.
  for name in "${soaks[@]}"; do
    mapfile -t args <<<"${argv[$name]}"
    "$py" -m harness.soak "${args[@]}" --check-only >/dev/null || {
      echo "learning_check: the soak '$name' failed its pre-launch check (above); nothing started" >&2
      exit 2
    }
  done
  fits_gpu "${#soaks[@]}"
  mkdir -p "$dir"
  "$py" -m harness.mps.cli start >"$dir/cumps-start.log" 2>&1 || {
    echo "learning_check: the MPS daemon did not start; no soak started ($dir/cumps-start.log):" >&2
    tail -n 3 "$dir/cumps-start.log" >&2
    exit 1
  }
  for name in "${soaks[@]}"; do
    mapfile -t args <<<"${argv[$name]}"
    setsid nohup "$py" -m harness.soak "${args[@]}" >"$dir/$name.log" 2>&1 </dev/null &
    echo "$name $!" >>"$dir/pids"
    echo "started $name (${clip_of[$name]}) as pid $! (log $dir/$name.log)"
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

diagnostics() {  # one figure and document per clip: the baseline and its candidates overlaid
  local run name clip drew=0
  local -A runs=()
  for run in "$dir"/*/run; do
    [ -d "$run" ] || continue
    name=$(basename "$(dirname "$run")"); clip=${name%%+*}
    if [ "$name" = "$clip" ]; then runs[$clip]="$run ${runs[$clip]:-}"; else runs[$clip]+="$run "; fi
  done
  for clip in "${!runs[@]}"; do
    # shellcheck disable=SC2086  # one word per run directory
    "$py" -m harness.report.diagnostics ${runs[$clip]} --out "$dir/$clip.diagnostics.png" \
      --output "$dir/$clip.diagnostics.json"
    drew=1
  done
  [ "$drew" -eq 1 ] || { echo "learning_check: no soak run directory under $dir" >&2; exit 1; }
}

case "$verb" in
  start) start "$@" ;;
  wait) wait_all "$@" ;;
  table) table ;;
  diagnostics) diagnostics ;;
  *) echo "usage: learning_check.sh start|wait|table|diagnostics DIR ..." >&2; exit 2 ;;
esac
