#!/usr/bin/env bash
# make log-conformance: starts `forklab log serve` (embedded Kafka, fsync per
# batch) on a free loopback port with a temporary data directory, runs the
# official Durable Streams conformance suite against it, stops the server,
# and exits non-zero if any test failed.
# Usage: run.sh FORKLAB_BIN [log serve flags…]   (after `npm ci` in this directory)
# Flags after the binary go to `forklab log serve` (for example --brokers).
set -euo pipefail
bin=$(realpath "$1"); shift
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
pid=
# cleanup sends the server SIGTERM and waits up to 10 s for a clean exit; a server
# that does not shut down is killed and fails the run.
cleanup() {
  local rc=$?
  if [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; then
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "forklab log serve did not shut down within 10 s of SIGTERM" >&2
      kill -QUIT "$pid" 2>/dev/null; sleep 1; tail -200 "$tmp/server.log" >&2
      kill -KILL "$pid" 2>/dev/null || true
      rc=1
    fi
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# The embedded broker's data directory, unless the flags name a cluster
# (log serve refuses --data-dir beside --brokers).
data=(--data-dir "$tmp/data")
for a in "$@"; do
  case "$a" in --brokers|--brokers=*) data=() ;; esac
done
# The suite's CORS preflight comes from https://example.com, an origin a
# loopback server refuses unless --cors-origin names it.
"$bin" log serve --addr "127.0.0.1:$port" "${data[@]}" --long-poll-timeout 2s --cors-origin https://example.com "$@" >"$tmp/server.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
cd "$here"
status=0
CONFORMANCE_TEST_URL="http://127.0.0.1:$port" CONFORMANCE_LONG_POLL_MS=2000 \
  npx vitest run --config vitest.config.mjs --reporter=default --reporter=json --outputFile.json="$tmp/results.json" || status=$?
# One plain closing line for CI: "conformance: N passed, N failed, N skipped".
python3 - "$tmp/results.json" <<'PY' || status=1
import json, sys
r = json.load(open(sys.argv[1]))
skipped = r.get("numPendingTests", 0) + r.get("numTodoTests", 0)
print(f"conformance: {r['numPassedTests']} passed, {r['numFailedTests']} failed, {skipped} skipped")
sys.exit(1 if r["numFailedTests"] else 0)
PY
if [ "$status" -ne 0 ]; then
  echo "conformance failed; server log:" >&2
  tail -50 "$tmp/server.log" >&2
  exit 1
fi
