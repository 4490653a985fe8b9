#!/usr/bin/env bash
# The presubmit's -short tier against each supported pair of
# controller-runtime and Kubernetes modules, newest patch of each minor.
#
# `make test` builds against the pair go.mod requires; this builds a copy
# of the working tree with each pair set in its go.mod (go get, which also
# lowers), then vets it and runs the -short tests (without the race
# detector: make test runs that).
#
#   hack/compat.sh                      every pair
#   hack/compat.sh v0.24.1/v0.36.6      one (controller-runtime/k8s.io)
#
# PKGS limits the packages (default ./...). Each pair's log is in
# bin/compat/<pair>.log; the script fails if any pair fails, after trying
# them all.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

pairs=("$@")
if [ ${#pairs[@]} -eq 0 ]; then
	pairs=(v0.23.3/v0.35.10 v0.24.1/v0.36.6 v0.25.3/v0.37.2)
fi
pkgs="${PKGS:-./...}"
out="$root/bin/compat"
mkdir -p "$out"

work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

failed=()
for pair in "${pairs[@]}"; do
	cr="${pair%/*}" k8s="${pair#*/}"
	log="$out/cr-$cr-k8s-$k8s.log"
	dir="$work/$cr-$k8s"
	mkdir -p "$dir"
	# The working tree as it is, committed or not, without its outputs.
	git ls-files -z --cached --others --exclude-standard | tar -c --null -T - | tar -x -C "$dir"
	start=$SECONDS
	echo "== controller-runtime $cr, k8s.io $k8s (log: ${log#"$root"/})"
	if (
		cd "$dir"
		set -x
		go get "sigs.k8s.io/controller-runtime@$cr" \
			"k8s.io/api@$k8s" "k8s.io/apimachinery@$k8s" "k8s.io/client-go@$k8s" \
			"k8s.io/apiextensions-apiserver@$k8s" "k8s.io/apiserver@$k8s" \
			"k8s.io/component-base@$k8s" "k8s.io/component-helpers@$k8s"
		go mod tidy
		grep -E '^\s+(k8s\.io/(api|apimachinery|client-go|apiextensions-apiserver)|sigs\.k8s\.io/controller-runtime) ' go.mod
		go build ./...
		go vet $pkgs
		go test -short -count=1 -timeout 30m $pkgs
	) >"$log" 2>&1; then
		echo "   passed in $((SECONDS - start)) s"
	else
		echo "   FAILED in $((SECONDS - start)) s; the end of its log:"
		tail -n 40 "$log" | sed 's/^/   /'
		failed+=("$pair")
	fi
	chmod -R u+w "$dir" 2>/dev/null
	rm -rf "$dir"
done

if [ ${#failed[@]} -gt 0 ]; then
	echo "compat: failed against ${failed[*]}"
	exit 1
fi
echo "compat: passed against ${pairs[*]}"
