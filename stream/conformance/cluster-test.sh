#!/usr/bin/env bash
# make log-cluster-test: the session log on a real multi-broker cluster.
# Starts `forklab kafka serve --brokers 3` (a development cluster in a
# process of its own: topics replicated 3 times, partition leaders spread
# over the brokers), then runs against it
#   - the Durable Streams conformance suite, through `forklab log serve
#     --brokers … --replication-factor 3 --partitions 3` (run.sh), and
#   - every test of stream/client (durability: SIGKILL during appends,
#     during a snapshot, during a start; zombies; duplicates and gaps across
#     restarts), each service on its own topic of that cluster
#     (FORKLAB_TEST_BROKERS).
# Stops the cluster it started.
# Usage: cluster-test.sh FORKLAB_BIN GO
set -euo pipefail
bin=$(realpath "$1")
go=${2:-go}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d)
pid=
cleanup() {
  local rc=$?
  if [ -n "$pid" ]; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
"$bin" kafka serve --brokers 3 --addr-file "$tmp/brokers" >"$tmp/kafka.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -s "$tmp/brokers" ] && break; sleep 0.1; done
brokers=$(cat "$tmp/brokers")
echo "cluster: 3 brokers at $brokers"
"$here/run.sh" "$bin" --brokers "$brokers" --replication-factor 3 --partitions 3
(cd "$root" && FORKLAB_TEST_BROKERS="$brokers" "$go" test -count=1 ./stream/client/)
