#!/usr/bin/env bash
# Runs every workload against sluice and the baselines, then W2 again at 64 workers (sluice
# and River on PostgreSQL) and sluice's W2 across Capacity 8, 32 and 128; see
# docs/BENCHMARKS.md. Flags pass through to every part (for example: ./run.sh -rounds 5).
# Must run as root (the PostgreSQL cluster runs as the postgres user via runuser).
set -euo pipefail
cd "$(dirname "$0")"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/compare" ./cmd/compare
"$bin/compare" "$@"
echo
echo "# W2 at 64 workers: sluice against River on PostgreSQL"
echo
"$bin/compare" -workloads W2 -workers 64 -batch-jobs 50000 -systems sluice-group,river-pg -extras=false "$@"
for w in 8 32 128; do
	echo
	echo "# W2 capacity sweep: sluice at Capacity $w"
	echo
	"$bin/compare" -workloads W2 -workers "$w" -batch-jobs 50000 -systems sluice-group -extras=false "$@"
done
