#!/usr/bin/env bash
# Runs every workload against sluice and the baselines; see docs/BENCHMARKS.md.
# Flags pass through (for example: ./run.sh -rounds 5). Must run as root
# (the PostgreSQL cluster runs as the postgres user via runuser).
set -euo pipefail
cd "$(dirname "$0")"
exec go run ./cmd/compare "$@"
