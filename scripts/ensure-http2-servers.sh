#!/usr/bin/env bash
# ensure-http2-servers.sh installs nginx and h2o from Debian's packages for the HTTP/2
# interop tests of internal/h2async (they start their own servers on 127.0.0.1 with
# generated configs; Node.js, the third, is required by .ci/run already), and leaves the
# packages' system services stopped: a policy-rc.d that refuses service starts is in
# place for the install, and anything started anyway is stopped.
set -euo pipefail
if { command -v nginx || [ -x /usr/sbin/nginx ]; } >/dev/null && command -v h2o >/dev/null; then
	exit 0
fi
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
policy=/usr/sbin/policy-rc.d
added=
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
	"${sudo[@]}" chmod 755 "$policy"
	added=1
fi
trap '[ -z "$added" ] || "${sudo[@]}" rm -f "$policy"' EXIT
echo "ensure-http2-servers: installing nginx and h2o (Debian packages) for the h2async interop tests"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends nginx h2o >/dev/null
if [ -f /run/nginx.pid ]; then
	"${sudo[@]}" nginx -s stop 2>/dev/null || true
fi
if [ -f /run/h2o.pid ]; then
	"${sudo[@]}" kill "$(cat /run/h2o.pid)" 2>/dev/null || true
fi
