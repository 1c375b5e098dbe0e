#!/usr/bin/env bash
# fauxqs: an SQS-compatible server (npm) that adapters/sqs's tests and the SQS example's
# end-to-end test start on 127.0.0.1. This script only installs it; the Go test helper
# (internal/fauxqs) starts and stops it.
#
#   .ci/fauxqs.sh install   install fauxqs@$FAUXQS_VERSION into .tools/fauxqs (idempotent)
#   .ci/fauxqs.sh dir       print the install folder
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="${FAUXQS_VERSION:-1.9.2}"
dir="${SLUICE_FAUXQS_DIR:-$root/.tools/fauxqs}"

installed() {
	local pkg="$dir/node_modules/fauxqs/package.json"
	[ -f "$pkg" ] && node -e 'process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)' "$pkg" "$version"
}

case "${1:-install}" in
install)
	command -v node >/dev/null || { echo "fauxqs.sh: node is not installed (fauxqs $version needs Node >= 20)" >&2; exit 1; }
	command -v npm >/dev/null || { echo "fauxqs.sh: npm is not installed" >&2; exit 1; }
	if installed; then
		echo "fauxqs $version already installed in $dir"
		exit 0
	fi
	mkdir -p "$dir"
	# Test binaries of several packages may install at once: one at a time.
	if command -v flock >/dev/null; then
		exec 9>"$dir/.install.lock"
		flock 9
		if installed; then
			echo "fauxqs $version already installed in $dir"
			exit 0
		fi
	fi
	# A package.json of our own keeps npm from walking up into the Go module.
	[ -f "$dir/package.json" ] || echo '{"name":"sluice-fauxqs","private":true}' >"$dir/package.json"
	npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "fauxqs@$version" >&2
	installed || { echo "fauxqs.sh: fauxqs $version not found in $dir after npm install" >&2; exit 1; }
	echo "fauxqs $version installed in $dir"
	;;
dir)
	echo "$dir"
	;;
*)
	echo "usage: $0 install|dir" >&2
	exit 2
	;;
esac
