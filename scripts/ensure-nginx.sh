#!/usr/bin/env bash
# ensure-nginx.sh installs nginx from Debian's packages for the HTTP/2 interop tests of
# internal/h2async (they start their own nginx on 127.0.0.1 with a generated config), and
# leaves the system's nginx service stopped: a policy-rc.d that refuses service starts is
# in place for the install, and anything the package started anyway is stopped.
set -euo pipefail
if command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; then
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
echo "ensure-nginx: installing nginx (Debian package) for the h2async interop tests"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends nginx >/dev/null
if [ -f /run/nginx.pid ]; then
	"${sudo[@]}" nginx -s stop 2>/dev/null || true
fi
