#!/usr/bin/env bash
# Installs the Portkey AI gateway pinned in bench/peer (package.json and
# package-lock.json) for the peer benchmark (make bench-peer, cmd/peerbench), with
# `npm ci` from the lock file and without install scripts, into PORTKEY_DIR (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/searchfleet/portkey-gateway-<version>): outside the
# repository, so no Go tool walks its node_modules. Prints the directory on stdout;
# an install that matches the lock file is left alone. Needs node (>= 18) and npm.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/bench/peer"
version="$(sed -n 's/.*"@portkey-ai\/gateway": *"\([^"]*\)".*/\1/p' "$src/package.json" | head -n1)"
dir="${PORTKEY_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/searchfleet/portkey-gateway-$version}"

for tool in node npm; do
	command -v "$tool" >/dev/null || { echo "install-portkey: $tool is not installed" >&2; exit 1; }
done
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 18 ]; then
	echo "install-portkey: node $(node --version) is too old (>= 18)" >&2
	exit 1
fi

installed="$dir/node_modules/@portkey-ai/gateway/package.json"
if [ -f "$installed" ] && cmp -s "$src/package-lock.json" "$dir/package-lock.json" &&
	grep -q "\"version\": \"$version\"" "$installed"; then
	echo "$dir"
	exit 0
fi

mkdir -p "$dir"
cp "$src/package.json" "$src/package-lock.json" "$dir/"
echo "install-portkey: installing @portkey-ai/gateway $version into $dir" >&2
(cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
grep -q "\"version\": \"$version\"" "$installed" || { echo "install-portkey: $installed is not version $version" >&2; exit 1; }
echo "$dir"
