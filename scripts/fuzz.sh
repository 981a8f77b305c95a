#!/usr/bin/env bash
# fuzz.sh runs every Go fuzz target of the module for a short time each, so a new
# `func Fuzz…` is picked up without editing anything: packages are found by their
# *_test.go files, targets by `go test -list`. A failure leaves the crasher in the
# package's testdata/fuzz/<Target>/, where plain `go test` replays it from then on.
#
#   FUZZTIME (default 10s) and FUZZMINIMIZETIME (default 5s) set the budgets; extra
#   arguments narrow the packages (default ./...).
set -euo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-5s}
pkgs=("$@")
[ ${#pkgs[@]} -eq 0 ] && pkgs=(./...)

start=$(date +%s)
failed=()
count=0
for pkg in $("$GO" list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' "${pkgs[@]}"); do
	for target in $("$GO" test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		count=$((count + 1))
		echo "== $pkg $target"
		if ! "$GO" test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "$pkg"; then
			failed+=("$pkg $target")
		fi
	done
done
echo "fuzz: $count targets in $(( $(date +%s) - start ))s"
if [ ${#failed[@]} -gt 0 ]; then
	printf 'FAILED: %s\n' "${failed[@]}"
	echo "crashers are in the packages' testdata/fuzz/; fix the code and commit them as regression tests"
	exit 1
fi
