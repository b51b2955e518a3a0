#!/usr/bin/env bash
# make bench-log: runs forklab log serve (embedded Kafka, every batch
# synced) and the reference Node server (in memory, then file-backed) on
# free loopback ports, drives them with the same `forklab log bench` loads,
# prints the tables and the ratios, and stops every server it started.
#   1. every load of BENCH_LOADS (producers x body bytes) against forklab and
#      the in-memory reference, with forklab's and the reference's resident
#      memory after each load, then the catch-up read of 1,000,000 events;
#   2. the first load against the file-backed reference too.
# Usage: bench.sh FORKLAB_BIN [bench flags…]
set -euo pipefail
bin=$(realpath "$1"); shift
here=$(cd "$(dirname "$0")" && pwd)
loads=${BENCH_LOADS:-16x100,64x100,256x100,16x1024,16x65536}
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
# 256 producers from one address: above the default per-client limit.
"$bin" log serve --addr "127.0.0.1:$pf" --data-dir "$tmp/forklab" --max-conns-per-client 1024 --quiet >"$tmp/forklab.log" 2>&1 & pids+=($!); fpid=$!
(cd "$here" && exec node reference-server.mjs "$pm") >"$tmp/ref-mem.log" 2>&1 & pids+=($!); mpid=$!
(cd "$here" && exec node reference-server.mjs "$pr" "$tmp/reference") >"$tmp/ref-file.log" 2>&1 & pids+=($!); rpid=$!
wait_up "$pf"; wait_up "$pm"; wait_up "$pr"
echo "== every load: forklab (embedded broker, every batch fdatasynced) against the reference server in memory"
"$bin" log bench "$@" --loads "$loads" \
  --target "forklab=http://127.0.0.1:$pf" --pid "forklab=$fpid" \
  --target "reference-memory=http://127.0.0.1:$pm" --pid "reference-memory=$mpid"
echo
echo "== the first load against the file-backed reference server too"
"$bin" log bench "$@" --loads "${loads%%,*}" --catchup-events 0 \
  --target "forklab=http://127.0.0.1:$pf" --target "reference-file=http://127.0.0.1:$pr"
