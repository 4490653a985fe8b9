#!/usr/bin/env bash
# Builds the control-plane binaries of the envtest backend from source,
# through the Go module proxy: kube-apiserver, kube-controller-manager and
# kube-scheduler (Kubernetes $K8S_VERSION; the scheduler is for kwokctl's
# clusters, hack/kwok.sh) and etcd ($ETCD_VERSION), with their real versions
# stamped in. They go to a folder keyed by version, os and arch under the
# user's cache dir, so every clone on the machine (CI clones afresh) shares
# one build. Present binaries of the right version are not rebuilt.
#
# Usage: hack/assets.sh [--print-dir]
# Environment: CONVERGE_ASSETS_DIR overrides the folder.
set -euo pipefail

K8S_VERSION=v1.37.2
ETCD_VERSION=v3.7.3

here="$(cd "$(dirname "$0")" && pwd)"
. "$here/cache.sh"
dest="${CONVERGE_ASSETS_DIR:-$cache/converge/k8s/$K8S_VERSION-$os-$arch}"

if [[ "${1:-}" == --print-dir ]]; then
	echo "$dest"
	exit 0
fi

mkdir -p "$dest"
exec 9>"$dest/.lock"
if command -v flock >/dev/null; then
	flock 9 # one build at a time per folder
fi

has_version() { # binary, expected text in its --version output
	# Read whole, not through grep -q: grep would exit at the first line,
	# and etcd, writing its next, would die of SIGPIPE and fail the check
	# under pipefail, now and then, so that a built etcd was built again.
	local version
	[[ -x "$dest/$1" ]] && version="$("$dest/$1" --version 2>/dev/null)" && [[ "$version" == *"$2"* ]]
}

build() { # module dir, package, binary, ldflags
	local tmp="$dest/.$3.tmp"
	echo "building $3 into $dest"
	# No DWARF from the compiler either (-w drops it at the link anyway): a
	# seventh less of the build's time (converge's own build from an empty
	# cache: 237 s rather than 275).
	(cd "$here/$1" && go build -trimpath -gcflags=all=-dwarf=false -ldflags "$4" -o "$tmp" "$2")
	mv "$tmp" "$dest/$3"
}

minor="${K8S_VERSION#v1.}"
minor="${minor%%.*}"
k8s_ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z \
 -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION \
 -X k8s.io/client-go/pkg/version.gitMajor=1 \
 -X k8s.io/client-go/pkg/version.gitMinor=$minor"

for bin in kube-apiserver kube-controller-manager kube-scheduler; do
	if ! has_version "$bin" "Kubernetes $K8S_VERSION"; then
		build k8s "k8s.io/kubernetes/cmd/$bin" "$bin" "$k8s_ldflags"
	fi
done
if ! has_version etcd "etcd Version: ${ETCD_VERSION#v}"; then
	build etcd go.etcd.io/etcd/server/v3 etcd "-s -w"
fi

for bin in kube-apiserver kube-controller-manager kube-scheduler etcd; do
	# The whole output is read: head would close the pipe early, and the
	# SIGPIPE would fail the script under pipefail.
	version="$("$dest/$bin" --version)"
	echo "${version%%$'\n'*}"
done
echo "assets ready in $dest"
