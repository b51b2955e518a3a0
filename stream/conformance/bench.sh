#!/usr/bin/env bash
# make bench-log: runs forklab log serve (embedded Kafka, fsync per batch)
# and the reference Node server (file-backed, then in memory) on free
# loopback ports, drives all three with the same `forklab log bench` load,
# prints the table and the ratios, and stops every server it started.
# Usage: bench.sh FORKLAB_BIN [bench flags…]
set -euo pipefail
bin=$(realpath "$1"); shift
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() {
  for _ in $(seq 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "server on port $1 did not start" >&2; return 1
}
pf=$(port); pr=$(port); pm=$(port)
"$bin" log serve --addr "127.0.0.1:$pf" --data-dir "$tmp/forklab" --quiet >"$tmp/forklab.log" 2>&1 & pids+=($!)
(cd "$here" && exec node reference-server.mjs "$pr" "$tmp/reference") >"$tmp/ref-file.log" 2>&1 & pids+=($!)
(cd "$here" && exec node reference-server.mjs "$pm") >"$tmp/ref-mem.log" 2>&1 & pids+=($!)
wait_up "$pf"; wait_up "$pr"; wait_up "$pm"
"$bin" log bench "$@" \
  --target "forklab=http://127.0.0.1:$pf" \
  --target "reference-file=http://127.0.0.1:$pr" \
  --target "reference-memory=http://127.0.0.1:$pm"
