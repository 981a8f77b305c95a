#!/usr/bin/env bash
# Installs staticcheck at the pinned version (honnef.co/go/tools, from the Go module
# proxy, built with the go on PATH) into STATICCHECK_DIR (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/searchfleet/staticcheck-<version>) and prints the
# binary's path on stdout. A binary already there is left alone, so a second run
# costs nothing. make lint and .ci/run run it; change the version here only.
set -euo pipefail

version=v0.8.2
dir="${STATICCHECK_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/searchfleet/staticcheck-$version}"
bin="$dir/staticcheck"
go="${GO:-go}"

if [ -x "$bin" ] && "$bin" -version 2>/dev/null | grep -qF "(${version#v})"; then
	echo "$bin"
	exit 0
fi
mkdir -p "$dir"
echo "ensure-staticcheck: installing staticcheck $version into $dir" >&2
GOBIN="$dir" GOFLAGS= "$go" install "honnef.co/go/tools/cmd/staticcheck@$version" >&2
"$bin" -version >&2
echo "$bin"
