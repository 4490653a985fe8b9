#!/usr/bin/env bash
# Starts a multi-component cluster without containers: kwokctl's binary
# runtime running etcd, kube-apiserver, kube-controller-manager and
# kube-scheduler (built from source by hack/assets.sh) and the kwok
# controller, which plays the nodes and pods. kwok and kwokctl are built
# with `go install` at $KWOK_VERSION into the user's cache dir; nothing is
# downloaded but Go modules.
#
# Usage:
#   hack/kwok.sh                 start a cluster, print its kubeconfig, and
#                                keep it until interrupted
#   hack/kwok.sh -- CMD [ARG...] start a cluster, run CMD with KUBECONFIG set
#                                to it, and exit with CMD's status
#   hack/kwok.sh --build-only    build what is missing and print the folder
#
# The cluster is deleted on exit, interrupt or termination, with every
# process it started.
set -euo pipefail

KWOK_VERSION=v0.8.0

here="$(cd "$(dirname "$0")" && pwd)"
os="$(go env GOOS)"
arch="$(go env GOARCH)"
if [[ -n "${XDG_CACHE_HOME:-}" ]]; then
	cache="$XDG_CACHE_HOME"
elif [[ "$os" == darwin ]]; then
	cache="$HOME/Library/Caches"
else
	cache="$HOME/.cache"
fi
bin="$cache/converge/kwok/$KWOK_VERSION-$os-$arch"

assets="$("$here/assets.sh" --print-dir)"
"$here/assets.sh" >&2

mkdir -p "$bin"
if [[ ! -x "$bin/kwokctl" || ! -x "$bin/kwok" ]] || ! "$bin/kwokctl" --version 2>/dev/null | grep -qF "$KWOK_VERSION"; then
	echo "building kwok and kwokctl $KWOK_VERSION into $bin" >&2
	GOBIN="$bin" go install "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
fi

if [[ "${1:-}" == --build-only ]]; then
	echo "$bin"
	exit 0
fi
if [[ $# -gt 0 && "$1" != -- ]]; then
	echo "usage: hack/kwok.sh [--build-only | -- CMD [ARG...]]" >&2
	exit 2
fi
[[ "${1:-}" == -- ]] && shift

work="$(mktemp -d "${TMPDIR:-/tmp}/converge-kwok.XXXXXX")"
name="converge-$$"
export KWOK_WORKDIR="$work"
version="$("$assets/kube-apiserver" --version)" # "Kubernetes v1.37.2"
export KWOK_KUBE_VERSION="${version##* }"
sleeper=""

cleanup() {
	if [[ -n "$sleeper" ]]; then kill "$sleeper" 2>/dev/null || true; fi
	"$bin/kwokctl" delete cluster --name "$name" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

started=$(date +%s%N)
"$bin/kwokctl" create cluster --name "$name" --runtime binary \
	--etcd-binary "$assets/etcd" \
	--kube-apiserver-binary "$assets/kube-apiserver" \
	--kube-controller-manager-binary "$assets/kube-controller-manager" \
	--kube-scheduler-binary "$assets/kube-scheduler" \
	--kwok-controller-binary "$bin/kwok" \
	--kubeconfig "$work/kubeconfig" \
	--wait 2m >&2
echo "kwok cluster $name ready in $(( ($(date +%s%N) - started) / 1000000 )) ms" >&2

if [[ $# -gt 0 ]]; then
	KUBECONFIG="$work/kubeconfig" "$@"
	exit $?
fi
echo "kubeconfig: $work/kubeconfig (interrupt to delete the cluster)" >&2
sleep infinity &
sleeper=$!
wait "$sleeper"
