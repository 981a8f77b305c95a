#!/usr/bin/env bash
# ensure-chromium.sh installs Debian's chromium for the web console's browser test
# (pkg/ingress/console), unless a chromium is on PATH already. The package is Debian's
# "chromium" (CHROMIUM_PACKAGE overrides it, e.g. "chromium=156.0.8078.108-1~deb12u1"
# to pin a version). The test finds the binary through CHROME_BIN or PATH.
set -euo pipefail
pkg=${CHROMIUM_PACKAGE:-chromium}
for bin in chromium chromium-browser; do
  if command -v "$bin" >/dev/null 2>&1; then
    echo "ensure-chromium: $("$bin" --version 2>/dev/null || echo "$bin") is installed"
    exit 0
  fi
done
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "ensure-chromium: not root and no sudo: install $pkg yourself" >&2; exit 1; }
  sudo=sudo
fi
echo "ensure-chromium: installing $pkg from Debian"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null
chromium --version
