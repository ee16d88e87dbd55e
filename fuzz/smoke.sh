#!/usr/bin/env bash
# Fuzz smoke: builds every [[bin]] target of fuzz/Cargo.toml and runs each for N seconds
# (default 20) from its seed corpus; fails on any crash. Skips (exit 0) without a nightly
# toolchain or cargo-fuzz. Usage: fuzz/smoke.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-20}"
if ! cargo +nightly --version >/dev/null 2>&1 || ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz smoke: skipped (no nightly/cargo-fuzz)"
  exit 0
fi
targets=$(awk '/^\[\[bin\]\]/{b=1; next} b && /^name *=/{gsub(/[" ]/, "", $0); sub(/^name=/, "", $0); print; b=0}' Cargo.toml)
cargo +nightly fuzz build
for t in $targets; do
  corpus="corpus/$t"
  mkdir -p "$corpus"
  # Work on a copy so that a smoke run does not grow the committed corpus.
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cp -r "$corpus/." "$work/"
  echo "fuzz smoke: $t for ${secs}s"
  rc=0
  cargo +nightly fuzz run "$t" "$work" -- -max_total_time="$secs" 2>&1 | tail -n 40 || rc=1
  rm -rf "$work"
  if [ "$rc" -ne 0 ]; then
    echo "fuzz smoke: $t FAILED (artifacts in fuzz/artifacts/$t)"
    exit 1
  fi
done
echo "fuzz smoke: ok ($(echo $targets | wc -w) targets, ${secs}s each)"
