#!/usr/bin/env bash
# The whole GPU run in one call, on a machine with no package index:
#
#   scripts/offline-gpu-run.sh [options] WHEELS_DIR OUT_DIR
#
# 1. install: the project and every wheel in WHEELS_DIR (scripts/prepare-gpu-wheels.sh makes it)
#    with `pip install --no-index --find-links WHEELS_DIR --no-deps --target` into a temporary
#    folder put first on PYTHONPATH for this script's commands only, removed at the end: the
#    machine's own Python environment is never changed, so no run can leave it half-configured;
# 2. plan: for every backend the registry lists, whether it runs on the GPU and on the CPU here,
#    and if not, why (not installed; the adapter does not claim the device; the framework sees
#    no GPU) -- printed and written to OUT_DIR/plan.tsv;
# 3. the suite (`gpt2-conformance run --device gpu`) on every backend that can run on the GPU and
#    (the parity pass) `run --device cpu` on every backend that runs on the CPU, all side by
#    side, the cores split between them (--jobs);
# 4. `gpt2-conformance bench --device gpu --quick`, alone on the machine (it times);
# 5. `gpt2-conformance merge` over every report and the bench: one matrix, parity table, bench
#    table and scoreboard in OUT_DIR/merged, run whatever the earlier steps did;
# 6. OUT_DIR/facts.md: the issue's GPU facts read off merged.json.
#
# Every step runs under `timeout`, within one overall budget (--budget, default 420 s) that
# always keeps time for the merge. Each step's exit status, time and log go to OUT_DIR/steps.tsv
# and OUT_DIR/logs/; the script exits 0 only if every step did, 1 if one did not, 2 on a bad
# command line or interpreter (nothing run), 3 with --device gpu when no backend could run on
# the GPU (no step failed, but this was not a GPU run).
#
# Options:
#   --device gpu|cpu   gpu (default). cpu runs the same steps on the CPU: a check of this
#                      script's own logic on a machine without a GPU (tests/test_gpu_run.py), NOT
#                      a GPU run; the parity pass is then skipped (it would repeat the first pass)
#   --backends a,b     only these backends (default: every one the registry lists)
#   --budget S         overall limit in seconds (default 420)
#   --bench-args "..." extra arguments for the bench step (e.g. "--backend numpy --sizes 768")
#   --no-bench         skip the bench step (recorded as skipped)
# Environment: PYTHON (default python3) is the interpreter whose packages the run uses; it is
# checked first (its version, and every requirement of the project's wheel that is not carried).
set -u -o pipefail

usage() { sed -n '2,/^set -u/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2; }

DEVICE=gpu BACKENDS="" BUDGET=420 BENCH_ARGS="" BENCH=1
while [ $# -gt 0 ]; do
  case "$1" in
    --device) DEVICE=${2:-}; shift 2 ;;
    --backends) BACKENDS=${2:-}; shift 2 ;;
    --budget) BUDGET=${2:-}; shift 2 ;;
    --bench-args) BENCH_ARGS=${2:-}; shift 2 ;;
    --no-bench) BENCH=0; shift ;;
    -h|--help) usage ;;
    --*) echo "offline-gpu-run: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -eq 2 ] || usage
case "$DEVICE" in gpu|cpu) ;; *) echo "offline-gpu-run: --device must be gpu or cpu, got '$DEVICE'" >&2; exit 2 ;; esac
case "$BUDGET" in ''|*[!0-9]*) echo "offline-gpu-run: --budget must be whole seconds, got '$BUDGET'" >&2; exit 2 ;; esac
WHEELS=$1 OUT=$2
PY=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
ls "$WHEELS"/*.whl >/dev/null 2>&1 || { echo "offline-gpu-run: no wheels in '$WHEELS' (scripts/prepare-gpu-wheels.sh makes them)" >&2; exit 2; }
# the interpreter, before anything is written: a wrong one shows otherwise as every clause's ERROR
command -v "$PY" >/dev/null 2>&1 || {
  echo "offline-gpu-run: PYTHON=$PY: no such interpreter; set PYTHON to the Python whose packages the run uses" >&2
  exit 2; }
"$PY" "$HERE/gpu_run.py" interpreter "$WHEELS" >/dev/null || exit 2
if [ -e "$OUT" ] && [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
  echo "offline-gpu-run: '$OUT' is not empty: give a new or empty folder (merge would mix in old reports)" >&2; exit 2
fi
mkdir -p "$OUT/logs" "$OUT/.rows" || exit 2
OUT=$(cd "$OUT" && pwd) WHEELS=$(cd "$WHEELS" && pwd)

START=$(date +%s)
DEADLINE=$((START + BUDGET))
MERGE_RESERVE=45          # seconds always kept for merge and facts
SITE=$(mktemp -d "${TMPDIR:-/tmp}/gpt2c-offline-XXXXXX") || exit 2
PIDS=()

cleanup() {
  local pid
  local f
  for f in "$OUT"/.rows/*.pid; do  # each running step's `timeout`, which passes the signal on to its command
    [ -e "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null
  done
  rm -rf "$SITE" "$OUT/.rows"
}
trap cleanup EXIT
trap 'echo "offline-gpu-run: interrupted" >&2; printf "interrupted\tfailed\t-\t-\t-\t-\tthe script was stopped by a signal\n" >> "$OUT/steps.tsv"; exit 143' INT TERM

printf 'step\tstatus\texit\tseconds\tlimit_s\tlog\tnote\n' > "$OUT/steps.tsv"
N=0  # steps so far: row files are numbered so that steps.tsv keeps the launch order

# what an exit status means, per command (gpt2_conformance.results, merge, bench)
meaning() {
  case "$1:$2" in
    *:0) echo "" ;;
    *:124|*:137) echo "stopped by its time limit" ;;
    run:1) echo "a clause failed, a waiver is stale, or the backend could not run (see the scorecard in the log)" ;;
    run:3) echo "nothing was checked: every clause not claimed or skipped" ;;
    run:4) echo "no clause failed, but the suite could not judge some (ERROR)" ;;
    merge:1) echo "merged, but a run failed or float32 h differs between columns of one backend (parity)" ;;
    merge:2) echo "the inputs could not be merged: nothing written" ;;
    bench:1) echo "a backend's bench child failed (see the bench log)" ;;
    bench:3) echo "nothing was timed: every backend was skipped (no GPU seen by any framework?)" ;;
    *) echo "exit $2" ;;
  esac
}

limit_for() {  # limit_for CAP [RESERVE]: seconds a step may take now, within the budget
  local left=$((DEADLINE - $(date +%s) - ${2:-$MERGE_RESERVE}))
  [ "$left" -lt "$1" ] && echo "$left" || echo "$1"
}

row() {  # row NAME STATUS EXIT SECONDS LIMIT LOG NOTE
  N=$((N + 1))
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" > "$OUT/.rows/$(printf %03d $N)"
  flush_rows
}

flush_rows() {  # append finished rows to steps.tsv in launch order, up to the first unfinished one
  local f
  for f in "$OUT"/.rows/[0-9][0-9][0-9]; do
    [ -e "$f" ] || break
    if [ -s "$f" ]; then cat "$f" >> "$OUT/steps.tsv"; rm -f "$f"; else break; fi
  done
}

skip() {  # skip NAME WHY
  row "$1" skipped - 0 - - "$2"
  echo "offline-gpu-run: skip $1: $2"
}

# step KIND NAME CAP [--bg] -- CMD...: runs CMD with PYTHONPATH=$SITE under timeout, logs to
# logs/NAME.log, records its row. KIND names the command for the meaning of its exit status.
step() {
  local kind=$1 name=$2 cap=$3 bg=0; shift 3
  [ "$1" = --bg ] && { bg=1; shift; }
  [ "$1" = -- ] && shift
  local limit; limit=$(limit_for "$cap" "${RESERVE:-$MERGE_RESERVE}")
  if [ "$limit" -lt 10 ]; then
    row "$name" no-time - 0 - - "not run: no time left in the ${BUDGET} s budget"
    echo "offline-gpu-run: $name: not run, no time left in the ${BUDGET} s budget"
    return 0
  fi
  N=$((N + 1))
  local slot; slot="$OUT/.rows/$(printf %03d $N)"; : > "$slot"
  local log="logs/$name.log"
  echo "offline-gpu-run: $name (limit ${limit} s): $*"
  (
    t0=$(date +%s)
    PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" timeout -k 10 "$limit" "$@" > "$OUT/$log" 2>&1 &
    echo $! > "$slot.pid"
    wait $!
    rc=$?
    rm -f "$slot.pid"
    secs=$(($(date +%s) - t0))
    # 3: the command ran, but nothing could be checked or timed there (run, bench): skipped, not failed
    case $rc in 0) st=ok ;; 3) st=skipped ;; 124|137) st=timeout ;; *) st=failed ;; esac
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$st" "$rc" "$secs" "$limit" "$log" "$(meaning "$kind" "$rc")" > "$slot.tmp"
    mv "$slot.tmp" "$slot"
    echo "offline-gpu-run: $name: $st (exit $rc, ${secs} s)"
  ) &
  local pid=$!
  if [ $bg = 1 ]; then PIDS+=("$pid"); else wait "$pid"; flush_rows; fi
}

wait_all() { local pid; for pid in "${PIDS[@]}"; do wait "$pid"; done; PIDS=(); flush_rows; }

status_of() { awk -F'\t' -v s="$1" '$1 == s {print $2}' "$OUT/steps.tsv" | tail -n 1; }

CORES=$(nproc 2>/dev/null || echo 2)
echo "offline-gpu-run: device $DEVICE, budget ${BUDGET} s, $CORES cores, python $PY, wheels $WHEELS, out $OUT"

# -- 1. install --------------------------------------------------------------------------------
names=$(for w in "$WHEELS"/*.whl; do basename "$w" | cut -d- -f1; done | sort)
dups=$(echo "$names" | uniq -d)
if [ -n "$dups" ]; then
  skip install "two versions of $(echo $dups) in $WHEELS: keep one"
else
  step install install 120 -- "$PY" -m pip install --no-index --find-links "$WHEELS" --no-deps --no-compile \
    --no-cache-dir --disable-pip-version-check --target "$SITE" "$WHEELS"/*.whl
fi
if [ "$(status_of install)" != ok ]; then
  echo "offline-gpu-run: the install failed; nothing else can run (logs/install.log)" >&2
else
  step check where 60 -- "$PY" "$HERE/gpu_run.py" where "$SITE"
fi
if [ "$(status_of install)" != ok ] || [ "$(status_of where)" != ok ]; then
  cat "$OUT/steps.tsv"; exit 1
fi
step check versions 60 -- "$PY" "$HERE/gpu_run.py" versions
if [ "$DEVICE" = gpu ]; then
  if command -v nvidia-smi >/dev/null 2>&1; then
    step check nvidia-smi 30 -- nvidia-smi
  else  # what the machine's GPU is, for the record only: each framework still says whether it sees one
    why="nvidia-smi not found: no NVIDIA driver on this machine, so no GPU is expected"
    skip nvidia-smi "$why (--device cpu checks the script's steps without one)"
  fi
fi

# -- 2. plan -----------------------------------------------------------------------------------
if [ -n "$BACKENDS" ]; then
  CANDIDATES=$(echo "$BACKENDS" | tr ',' ' ')
else
  CANDIDATES=$(PYTHONPATH="$SITE" timeout 60 "$PY" "$HERE/gpu_run.py" backends 2>"$OUT/logs/backends.log" | tr '\n' ' ')
fi
[ -z "${CANDIDATES// /}" ] && row plan failed - 0 - logs/backends.log "no backend to plan: the registry could not be listed"
# JAX takes 75% of the GPU's memory at start unless told not to: several processes share the GPU here
export XLA_PYTHON_CLIENT_PREALLOCATE=false
safe() { printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '_'; }  # a file name for a backend (a plug-in spec has a colon)
for b in $CANDIDATES; do
  step check "probe-$(safe "$b")" 120 --bg -- "$PY" "$HERE/gpu_run.py" probe "$DEVICE" "$b"
done
wait_all
printf 'backend\tcpu\t%s\treason\n' "$DEVICE" > "$OUT/plan.tsv"
GPU_RUN="" CPU_RUN=""
for b in $CANDIDATES; do
  line=$(awk -F'\t' -v b="$b" '$1 == b && NF >= 3' "$OUT/logs/probe-$(safe "$b").log" | tail -n 1)
  if [ -z "$line" ]; then
    line=$(printf '%s\tskip\tskip\tthe probe failed (logs/probe-%s.log)' "$b" "$(safe "$b")")
  fi
  echo "$line" >> "$OUT/plan.tsv"
  IFS=$'\t' read -r _ cpu dev why <<< "$line"
  [ "$dev" = run ] && GPU_RUN="$GPU_RUN $b"
  [ "$cpu" = run ] && CPU_RUN="$CPU_RUN $b"
  why=${why:-see plan.tsv}
  [ "$dev" = skip ] && echo "offline-gpu-run: skip $b on $DEVICE: ${why#"$DEVICE: "}"
  [ "$DEVICE" != cpu ] && [ "$cpu" = skip ] && echo "offline-gpu-run: skip $b on cpu: ${why#"cpu: "}"
done
[ "$DEVICE" = cpu ] && CPU_RUN=""   # the first pass already ran on the CPU
echo "offline-gpu-run: on $DEVICE:${GPU_RUN:- none}; parity pass on cpu:${CPU_RUN:- none}"

# -- 3. the suites, side by side ---------------------------------------------------------------
set -- $GPU_RUN; n_gpu=$#
set -- $CPU_RUN; n_cpu=$#
runs=$((n_gpu + n_cpu))
JOBS=$(( runs > 0 ? (CORES / runs > 0 ? CORES / runs : 1) : 1 ))
RESERVE=$((MERGE_RESERVE + (BENCH ? 60 : 0)))   # the bench keeps at least a minute
for b in $GPU_RUN; do
  step run "suite-$DEVICE-$(safe "$b")" 240 --bg -- "$PY" -m gpt2_conformance.cli run --backend "$b" --device "$DEVICE" \
    --jobs "$JOBS" --timeout 90 --report-dir "$OUT/suite-$DEVICE/$(safe "$b")"
done
for b in $CPU_RUN; do  # the CPU pass sees no GPU: torch and JAX cannot place anything there by default
  step run "suite-cpu-$(safe "$b")" 240 --bg -- env CUDA_VISIBLE_DEVICES= JAX_PLATFORMS=cpu \
    "$PY" -m gpt2_conformance.cli run --backend "$b" --device cpu --jobs "$JOBS" --timeout 90 \
    --report-dir "$OUT/suite-cpu/$(safe "$b")"
done
[ "$DEVICE" = cpu ] && skip parity-pass-cpu "--device cpu: the first pass already ran on the CPU"
[ -z "$GPU_RUN" ] && skip "suite-$DEVICE" "no backend can run on $DEVICE here (plan.tsv)"
wait_all
unset RESERVE

# -- 4. the bench, alone -----------------------------------------------------------------------
if [ "$BENCH" = 1 ]; then
  left=$(limit_for 200)
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of words
  step bench "bench-$DEVICE" 200 -- "$PY" -m gpt2_conformance.cli bench --device "$DEVICE" --quick \
    --timeout "$(( left > 20 ? left / 2 : 10 ))" --out-dir "$OUT/bench-$DEVICE" $BENCH_ARGS
else
  skip "bench-$DEVICE" "--no-bench"
fi

# -- 5. merge, whatever came before ------------------------------------------------------------
inputs=()
dirs=("$OUT/suite-$DEVICE" "$OUT/bench-$DEVICE")
[ "$DEVICE" != cpu ] && dirs+=("$OUT/suite-cpu")
for d in "${dirs[@]}"; do
  [ -d "$d" ] && [ -n "$(find "$d" -name '*.json' -print -quit)" ] && inputs+=("$d")
done
if [ ${#inputs[@]} -eq 0 ]; then
  skip merge "no report was written (every suite and the bench failed or was skipped)"
else
  RESERVE=5 step merge merge 40 -- "$PY" -m gpt2_conformance.cli merge "${inputs[@]}" --out-dir "$OUT/merged"
fi
RESERVE=0 step check facts 20 -- "$PY" "$HERE/gpu_run.py" facts "$OUT" "$DEVICE"

# -- summary -----------------------------------------------------------------------------------
echo
column -t -s $'\t' "$OUT/steps.tsv" 2>/dev/null || cat "$OUT/steps.tsv"
echo "offline-gpu-run: $(( $(date +%s) - START )) s in all (budget ${BUDGET} s); results in $OUT"
[ -f "$OUT/merged/merged.md" ] && echo "offline-gpu-run: matrix, parity and bench: $OUT/merged/merged.md, scoreboard: $OUT/merged/scoreboard.html"
if awk -F'\t' 'NR > 1 && $2 != "ok" && $2 != "skipped" {bad = 1} END {exit !bad}' "$OUT/steps.tsv"; then
  echo "offline-gpu-run: some steps did not succeed (steps.tsv)"; exit 1
fi
if [ "$DEVICE" = gpu ] && [ -z "$GPU_RUN" ]; then
  echo "offline-gpu-run: not a GPU run: no backend could run on the GPU here (plan.tsv says why for each)"; exit 3
fi
exit 0
