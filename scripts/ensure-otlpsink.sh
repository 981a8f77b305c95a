#!/usr/bin/env bash
# Builds test/otlpsink — the OpenTelemetry Collector's OTLP receiver in a module of
# its own (its go.mod and go.sum pin the collector's version) — into OTLPSINK_DIR
# (default ${XDG_CACHE_HOME:-$HOME/.cache}/searchfleet/otlpsink-<hash of its
# sources>) and prints the binary's path on stdout. A binary already built from the
# same sources is left alone. The tracing tests run it (internal/testkit/otlpsink).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/test/otlpsink"
sum=$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-16)
dir="${OTLPSINK_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/searchfleet/otlpsink-$sum}"
bin="$dir/otlpsink"
go="${GO:-go}"

if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$dir"
echo "ensure-otlpsink: building the OTLP receiver into $dir" >&2
(cd "$src" && GOFLAGS= GOWORK=off "$go" build -o "$bin.tmp" . >&2)
mv "$bin.tmp" "$bin"
echo "$bin"
