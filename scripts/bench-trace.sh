#!/usr/bin/env bash
# make bench-trace: bench-e2e's throughput phase with tracing off, then on (every job
# sampled, spans exported over OTLP/HTTP to a real receiver on loopback: the
# collector's otlpreceiver, counting them, scripts/ensure-otlpsink.sh), ROUNDS times
# alternately (default 2), so the difference can be read against the run-to-run noise.
# ARGS go to fleetbench (default: -concurrency 16 -duration 10s -warmup 2s).
set -euo pipefail

go="${GO:-go}"
rounds="${ROUNDS:-2}"
args=(${ARGS:--concurrency 16 -duration 10s -warmup 2s})
root="$(cd "$(dirname "$0")/.." && pwd)"
sink=$("$root/scripts/ensure-otlpsink.sh")
bin=$(mktemp -d)
trap 'rm -rf "$bin"; [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null || true' EXIT
(cd "$root" && "$go" build -o "$bin/fleetbench" ./cmd/fleetbench)
port=$((20000 + RANDOM % 20000))
# The receiver stops when its stdin closes: the fifo's writer is this script.
mkfifo "$bin/stdin"
"$sink" -quiet -grpc 127.0.0.1:0 -http "127.0.0.1:$port" <"$bin/stdin" 2>"$bin/sink.log" &
pid=$!
exec 3>"$bin/stdin"
for i in $(seq "$rounds"); do
	echo "=== tracing off, round $i"
	"$bin/fleetbench" "${args[@]}" -rate 0 -ttft 0 -single 0 -floor=false
	echo "=== tracing on (OTEL_TRACES_SAMPLER=always_on), round $i"
	OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$port" OTEL_TRACES_SAMPLER=always_on \
		"$bin/fleetbench" "${args[@]}" -rate 0 -ttft 0 -single 0 -floor=false
done
exec 3>&-
wait "$pid" || true
pid=
grep -h "spans received" "$bin/sink.log" || true
