#!/usr/bin/env bash
# Measures what CI costs: runs .ci/run in a fresh clone of this repository's
# HEAD, as CI does, with go test's output as JSON, then prints the time of
# each phase, the ten slowest packages and the twenty slowest tests
# (hack/testtime).
#
# By default the clone starts as a fresh machine would: an empty Go build
# cache and an empty user cache dir, so the control-plane binaries are built
# again. The Go module cache is the machine's (GOMODCACHE; a fresh machine
# may have to download some of it). --warm-assets keeps this machine's
# control-plane and kwok binaries (the budget with them warm is smaller);
# --warm keeps the Go build cache too.
#
# --load runs the measured command with the cores already busy, so that a
# test which fails only on a loaded machine fails here before it does in CI:
# one busy loop per core (--load=N for N of them), started just before the
# command and killed just after it. They run at the tests' own nice level:
# a busy CI machine's load is its neighbours and the hypervisor's steal,
# which the tests cannot outrank, and the scheduler gives a process at
# nice 19 about 1.5% of a nice-0 one's share, so a niced loop would load
# almost nothing. A loop rather than a second copy of the tests: a second
# copy would share this machine's /tmp/converge-kwok, ports and caches with
# the measured run and mix its failures with the run's, and its load comes
# and goes with its phases (much of it waits in real time), so no two runs
# would be loaded alike; a loop takes the cores only, steadily. Each loop
# ends within a second of this script, however it ends (the EXIT trap kills
# it; it also watches this script's pid, for a SIGKILL), and after
# loadlimit whatever happens (timeout).
#
# Usage: hack/ci-time.sh [--warm-assets | --warm] [--full] [--load[=N]] [OUT_DIR]
#   --full  runs make test-full instead of .ci/run's make test
#   --load  runs it beside one busy process per core, or N of them
# Writes OUT_DIR (default bin/ci-time): log.txt (every line with the seconds
# since the start), test.json (go test -json) and summary.txt.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
warm=""
full=""
load=0
out=""
usage="usage: hack/ci-time.sh [--warm-assets | --warm] [--full] [--load[=N]] [OUT_DIR]"
for arg in "$@"; do
	case "$arg" in
	--warm-assets | --warm) warm="$arg" ;;
	--full) full=1 ;;
	--load) load=$(nproc) ;;
	--load=*)
		load="${arg#--load=}"
		if ! [[ "$load" =~ ^[1-9][0-9]*$ ]]; then
			echo "$usage" >&2
			exit 2
		fi
		;;
	-*)
		echo "$usage" >&2
		exit 2
		;;
	*) out="$arg" ;;
	esac
done
out="$(mkdir -p "${out:-$root/bin/ci-time}" && cd "${out:-$root/bin/ci-time}" && pwd)"

. "$here/cache.sh"
assets="$("$here/assets.sh" --print-dir 2>/dev/null || true)"
kwokbin="$cache/converge/kwok/$(sed -n 's/^KWOK_VERSION=\([^ ]*\).*/\1/p' "$here/kwok.sh")-$os-$arch"
gomodcache="$(go env GOMODCACHE)"
gocache="$(go env GOCACHE)"

# The load: busy loops, bounded by loadlimit (longer than any run measured)
# and by this script's life.
loadlimit=3h
hogs=()
hogsleft=0
startload() {
	local i
	for ((i = 0; i < load; i++)); do
		timeout "$loadlimit" bash -c 'while kill -0 "$1" 2>/dev/null; do for ((i = 0; i < 50000; i++)); do :; done; done' hog "$$" &
		hogs+=("$!")
	done
}
# stopload kills the loops and waits for them; hogsleft counts those that
# were still running, so the summary can say when the load ended early.
stopload() {
	local pid
	for pid in "${hogs[@]}"; do
		kill -0 "$pid" 2>/dev/null && hogsleft=$((hogsleft + 1))
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${hogs[@]}"; do wait "$pid" 2>/dev/null || true; done
	hogs=()
}

work="$(mktemp -d "${TMPDIR:-/tmp}/converge-ci-time.XXXXXX")"
cleanup() {
	stopload
	chmod -R u+w "$work" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# testtime stamps the log's lines and sums it up; built with this machine's
# caches, outside what is measured.
(cd "$root" && go build -o "$work/testtime" ./hack/testtime)
git clone --quiet --no-local "$root" "$work/converge"
mkdir -p "$work/cache"
env=(XDG_CACHE_HOME="$work/cache" GOMODCACHE="$gomodcache" GOCACHE="$work/cache/go-build" TESTFLAGS=-json)
case "$warm" in
--warm-assets)
	env+=(CONVERGE_ASSETS_DIR="$assets" CONVERGE_KWOK_DIR="$kwokbin")
	;;
--warm)
	env+=(CONVERGE_ASSETS_DIR="$assets" CONVERGE_KWOK_DIR="$kwokbin" GOCACHE="$gocache")
	;;
esac
cmd=(bash .ci/run)
if [[ -n "$full" ]]; then
	cmd=(bash -c 'export CI=true && make test-full')
fi

commit=$(git -C "$work/converge" rev-parse --short HEAD) # what was cloned, whatever lands meanwhile
loaded=""
if ((load > 0)); then
	loaded=", under load: $load busy processes"
fi
echo "ci-time: ${cmd[*]} in a fresh clone of $commit (${warm:-cold caches}$loaded); log in $out/log.txt"
start=$(date +%s)
# vmstat's CPU columns every 10 s: how busy the cores were, phase by phase.
vmstat=""
if command -v vmstat >/dev/null; then
	vmstat -n 10 >"$out/vmstat.txt" &
	vmstat=$!
fi
startload
set +e
(cd "$work/converge" && env "${env[@]}" "${cmd[@]}" </dev/null 2>&1) | "$work/testtime" -stamp >"$out/log.txt"
status=${PIPESTATUS[0]}
set -e
end=$(date +%s)
stopload
if ((load > 0 && hogsleft < load)); then
	loaded+=" ($((load - hogsleft)) of them ended before the run did, at the $loadlimit limit)"
fi
[[ -n "$vmstat" ]] && kill "$vmstat" 2>/dev/null

sed -n 's/^ *[0-9]* \({.*\)$/\1/p' "$out/log.txt" >"$out/test.json"
{
	echo "commit $commit, $(date -u +%Y-%m-%d), $(nproc) cores, ${warm:-cold caches}${full:+, make test-full}$loaded"
	printf 'whole run: %dm%02ds, exit status %d\n' $(((end - start) / 60)) $(((end - start) % 60)) "$status"
	# Phases: when each began, from the log's own lines.
	first() { awk -v pat="$1" '$0 ~ pat {print $1; exit}' "$out/log.txt"; }
	for phase in "building kube-apiserver:building kube-apiserver" "kwok:building kwok" "go vet:go vet" \
		"go test:go test " "first test event:[{]\"Time\""; do
		at="$(first "${phase#*:}")"
		[[ -n "$at" ]] && printf '  %-18s began at %dm%02ds\n' "${phase%%:*}" $((at / 60)) $((at % 60))
	done
	if [[ -s "$out/vmstat.txt" ]]; then
		awk -v load="$load" 'NR > 2 {n++; busy += 100 - $15} END {if (n) printf "  CPU busy %.0f%% on average%s (vmstat every 10 s: %s)\n", busy / n, (load > 0 ? ", the load included" : ""), FILENAME}' "$out/vmstat.txt"
	fi
	echo
	if [[ -s "$out/test.json" ]]; then
		"$work/testtime" "$out/test.json"
	else
		echo "no go test -json output: see $out/log.txt"
	fi
} | tee "$out/summary.txt"
exit "$status"
