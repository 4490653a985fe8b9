#!/usr/bin/env bash
# Generates the deepcopy functions, clientset, listers and informers of the
# mirror example's API (examples/mirror/api/v1alpha1) with
# k8s.io/code-generator, pinned by this folder's go.mod so the project's own
# go.mod does not carry it.
#
# Generation runs in a scratch copy of the API package inside a copy of the
# project's go.mod, so a failed run leaves the tree as it was and --verify
# compares against exactly what an update would write.
#
# Usage: hack/codegen/update.sh [--verify]
#   --verify  regenerate into a temporary folder and diff against the tree;
#             exit 1 on any difference.
set -euo pipefail

verify=false
case "${1:-}" in
"") ;;
--verify) verify=true ;;
*)
	echo "usage: $0 [--verify]" >&2
	exit 2
	;;
esac

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
module="$(cd "$root" && go list -m)"
api_dir=examples/mirror/api/v1alpha1
gen_dir=examples/mirror/generated
pkg="$module/examples/mirror"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# The generators, built from the versions this folder's go.mod pins.
(cd "$here" && go build -o "$tmp/bin/" \
	k8s.io/code-generator/cmd/deepcopy-gen \
	k8s.io/code-generator/cmd/client-gen \
	k8s.io/code-generator/cmd/lister-gen \
	k8s.io/code-generator/cmd/informer-gen)

# The scratch module: the project's go.mod and go.sum (so the API package
# resolves its imports as it does in the tree) and the hand-written API files.
ws="$tmp/ws"
mkdir -p "$ws/$api_dir"
cp "$root/go.mod" "$root/go.sum" "$ws/"
find "$root/$api_dir" -maxdepth 1 -name '*.go' ! -name 'zz_generated.*' ! -name '*_test.go' \
	-exec cp {} "$ws/$api_dir/" \;

header="$here/boilerplate.go.txt"
cd "$ws"
"$tmp/bin/deepcopy-gen" --go-header-file "$header" \
	--output-file zz_generated.deepcopy.go \
	"$pkg/api/v1alpha1"
"$tmp/bin/client-gen" --go-header-file "$header" \
	--output-dir "$ws/$gen_dir/clientset" \
	--output-pkg "$pkg/generated/clientset" \
	--clientset-name versioned \
	--input-base "$pkg" \
	--input api/v1alpha1
"$tmp/bin/lister-gen" --go-header-file "$header" \
	--output-dir "$ws/$gen_dir/listers" \
	--output-pkg "$pkg/generated/listers" \
	"$pkg/api/v1alpha1"
"$tmp/bin/informer-gen" --go-header-file "$header" \
	--output-dir "$ws/$gen_dir/informers" \
	--output-pkg "$pkg/generated/informers" \
	--versioned-clientset-package "$pkg/generated/clientset/versioned" \
	--listers-package "$pkg/generated/listers" \
	"$pkg/api/v1alpha1"

# staticcheck.conf in the generated folder is hand-written: kept as it is.
if [[ -f "$root/$gen_dir/staticcheck.conf" ]]; then
	cp "$root/$gen_dir/staticcheck.conf" "$ws/$gen_dir/"
fi

deepcopy="$api_dir/zz_generated.deepcopy.go"
if $verify; then
	status=0
	diff -u "$root/$deepcopy" "$ws/$deepcopy" || status=1
	diff -ruN "$root/$gen_dir" "$ws/$gen_dir" || status=1
	if [[ $status -ne 0 ]]; then
		echo "generated code is out of date: run hack/codegen/update.sh" >&2
		exit 1
	fi
	echo "generated code is up to date"
	exit 0
fi

cp "$ws/$deepcopy" "$root/$deepcopy"
rm -rf "${root:?}/$gen_dir"
cp -R "$ws/$gen_dir" "$root/$gen_dir"
echo "generated $deepcopy and $gen_dir"
