#!/usr/bin/env bash
# Builds kwok and kwokctl at $KWOK_VERSION with `go install` into a folder
# keyed by version, os and arch under the user's cache dir (where sim/kwok
# looks), after the control-plane binaries of hack/assets.sh, kube-scheduler
# among them. Nothing is downloaded but Go modules. Present binaries of the
# right version are not rebuilt. Prints the folder.
#
# `converge kwok` starts a cluster from these binaries; the cluster
# backend's tests start one of their own.
#
# Environment: CONVERGE_KWOK_DIR overrides the folder.
set -euo pipefail

KWOK_VERSION=v0.8.0 # sim/kwok.Version

here="$(cd "$(dirname "$0")" && pwd)"
. "$here/cache.sh"
bin="${CONVERGE_KWOK_DIR:-$cache/converge/kwok/$KWOK_VERSION-$os-$arch}"

"$here/assets.sh" >&2

mkdir -p "$bin"
exec 9>"$bin/.lock"
if command -v flock >/dev/null; then
	flock 9 # one build at a time per folder
fi
# The version is read whole (see has_version in hack/assets.sh).
version="$("$bin/kwokctl" --version 2>/dev/null || true)"
if [[ ! -x "$bin/kwokctl" || ! -x "$bin/kwok" || "$version" != *"$KWOK_VERSION"* ]]; then
	echo "building kwok and kwokctl $KWOK_VERSION into $bin" >&2
	# Without symbols or DWARF, as hack/assets.sh builds (the version comes
	# from the module's build information, which stays).
	GOBIN="$bin" go install -trimpath -gcflags=all=-dwarf=false -ldflags="-s -w" \
		"sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
fi
echo "$bin"
