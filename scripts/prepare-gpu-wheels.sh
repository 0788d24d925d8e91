#!/usr/bin/env bash
# Prepares WHEELS_DIR for scripts/offline-gpu-run.sh on a machine with no package index:
#
#   scripts/prepare-gpu-wheels.sh [--requirements FILE] [--limit-mib N] WHEELS_DIR
#
# - the project's own wheel (`pip wheel --no-deps .`, from this working tree);
# - the wheels FILE names (default scripts/gpu-wheels.txt: what the GPU machine lacks or has too
#   old), downloaded here for that machine (CPython 3.12, x86-64 Linux) without their
#   dependencies (the file says why each one's are already there).
# It fails, and leaves WHEELS_DIR as it was, if a download fails, if two versions of one package
# would be carried (pip would refuse the install there), or if the wheels add up to more than
# --limit-mib (default 64: what one call to the GPU machine may carry, with the working tree).
# WHEELS_DIR must be new or empty. Environment: PYTHON (default: the repository's .venv, else
# python3) is the interpreter whose pip builds and downloads.
set -euo pipefail

usage() { sed -n '2,/^set -e/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2; }

ROOT=$(cd "$(dirname "$0")/.." && pwd)
REQS=$ROOT/scripts/gpu-wheels.txt LIMIT_MIB=64
while [ $# -gt 0 ]; do
  case "$1" in
    --requirements) REQS=${2:-}; shift 2 ;;
    --limit-mib) LIMIT_MIB=${2:-}; shift 2 ;;
    -h|--help) usage ;;
    --*) echo "prepare-gpu-wheels: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || usage
DIR=$1
case "$LIMIT_MIB" in ''|*[!0-9.]*) echo "prepare-gpu-wheels: --limit-mib must be a number, got '$LIMIT_MIB'" >&2; exit 2 ;; esac
[ -f "$REQS" ] || { echo "prepare-gpu-wheels: no requirements file '$REQS'" >&2; exit 2; }
if [ -e "$DIR" ] && [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then
  echo "prepare-gpu-wheels: '$DIR' is not empty: give a new or empty folder (two versions of a wheel stop the install)" >&2
  exit 2
fi
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON; elif [ -x "$ROOT/.venv/bin/python" ]; then PY=$ROOT/.venv/bin/python; else PY=python3; fi

STAGE=$(mktemp -d "${TMPDIR:-/tmp}/gpt2c-wheels-XXXXXX")
trap 'rm -rf "$STAGE"' EXIT

echo "prepare-gpu-wheels: the project's wheel (pip wheel --no-deps $ROOT)"
"$PY" -m pip wheel -q --no-deps --disable-pip-version-check -w "$STAGE" "$ROOT"

if grep -qvE '^[[:space:]]*(#|$)' "$REQS"; then
  echo "prepare-gpu-wheels: the wheels $REQS names, for CPython 3.12 on x86-64 Linux"
  "$PY" -m pip download -q --no-deps --only-binary=:all: --disable-pip-version-check \
    --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform linux_x86_64 --platform any -d "$STAGE" -r "$REQS"
fi

dups=$(for w in "$STAGE"/*.whl; do basename "$w" | cut -d- -f1 | tr 'A-Z.-' 'a-z__'; done | sort | uniq -d)
if [ -n "$dups" ]; then
  echo "prepare-gpu-wheels: error: two versions of $(echo $dups) would be carried; keep one in $REQS" >&2
  exit 1
fi

total=$(du -cb "$STAGE"/*.whl | tail -n 1 | cut -f1)
limit=$("$PY" -c "import sys; print(int(float(sys.argv[1]) * 2**20))" "$LIMIT_MIB")
for w in "$STAGE"/*.whl; do
  printf '  %-60s %8.1f MiB\n' "$(basename "$w")" "$("$PY" -c "import os,sys; print(os.path.getsize(sys.argv[1]) / 2**20)" "$w")"
done
mib=$("$PY" -c "import sys; print(f'{int(sys.argv[1]) / 2**20:.1f}')" "$total")
if [ "$total" -gt "$limit" ]; then
  echo "prepare-gpu-wheels: error: the wheels add up to $mib MiB, over the limit of $LIMIT_MIB MiB" \
       "(what one call to the GPU machine may carry, the working tree included): drop a wheel from $REQS;" \
       "nothing was written to $DIR" >&2
  exit 1
fi
mkdir -p "$DIR"
mv "$STAGE"/*.whl "$DIR"/
echo "prepare-gpu-wheels: $(ls "$DIR"/*.whl | wc -l) wheels, $mib MiB (limit $LIMIT_MIB MiB) in $DIR"
