#!/bin/sh
# cover.sh: statement coverage of core/ by a simulator sweep (docs/simulator.md, "Reach").
# Builds simrun with coverage of core/..., runs the default sweep (seeds 1..N, swarm), prints
# the coverage per core package and every core function below 100%, with its percentage.
#
#   scripts/cover.sh [N [PARALLEL [PROFILE]]]   # default: 1000 seeds, all CPUs, swarm
#
# COVER_OUT=file keeps the merged profile (go tool cover -html=file shows the lines).
set -eu
n=${1:-1000}
par=${2:-$(getconf _NPROCESSORS_ONLN)}
profile=${3:-swarm}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# main must be instrumented too, or the binary writes no coverage data at exit.
go build -cover -covermode=set -coverpkg=./core/...,./cmd/simrun -o "$tmp/simrun" ./cmd/simrun
pkgs=github.com/sluicehq/sluice/core/...
mkdir "$tmp/cov"
status=0
GOCOVERDIR="$tmp/cov" "$tmp/simrun" --count "$n" --parallel "$par" --profile "$profile" >"$tmp/sweep.txt" || status=$?
tail -n 1 "$tmp/sweep.txt"
echo "core statement coverage by $n $profile seeds, per package:"
go tool covdata percent -pkg="$pkgs" -i "$tmp/cov" | sed 's/^/  /'
go tool covdata textfmt -pkg="$pkgs" -i "$tmp/cov" -o "$tmp/cover.out"
echo "total:"
go tool cover -func "$tmp/cover.out" | tail -n 1 | sed 's/^total:[[:space:]]*(statements)[[:space:]]*/  /'
echo "core functions below 100%:"
go tool cover -func "$tmp/cover.out" | grep -v '^total:' | grep -v '100.0%$' | sed 's|github.com/sluicehq/sluice/||; s/^/  /'
if [ -n "${COVER_OUT:-}" ]; then cp "$tmp/cover.out" "$COVER_OUT"; fi
if [ "$status" -ne 0 ]; then
	echo "the sweep itself failed (exit $status):"
	tail -n 20 "$tmp/sweep.txt"
	exit "$status"
fi
