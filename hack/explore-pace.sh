#!/usr/bin/env bash
# The pace of exploration, side by side: for each revision given (HEAD
# when none), builds converge and the compiled tests of the scenarios, the
# webapp and the mirror, then runs, in turn and ROUNDS times over (default
# 5), the five explorations docs/guide.md reports:
#
#   converge explore webapp --inputs    (examples/webapp)
#   converge explore mirror --inputs    (examples/mirror)
#   converge explore webapp             (examples/webapp)
#   converge explore mirror             (examples/mirror)
#   converge explore baseline           (scenarios)
#
# each with --parallel 2 and --test-binary, the test binary built before
# and not counted. It prints, per exploration and revision, the points and
# the range of the CLI's two rates: points per second over the whole
# exploration (the reference runs and the report included), and while the
# points ran; and the median CPU seconds (user and system) its processes
# used, which drift less than the rates: on a busy machine the CPU an
# exploration needs is what its pace depends on. Turns rather than blocks: a machine whose pace drifts from
# one minute to the next drifts for every revision alike.
#
# Usage: hack/explore-pace.sh [-r ROUNDS] [REV...]
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

rounds=5
if [[ "${1:-}" == -r ]]; then
	rounds="$2"
	shift 2
fi
revs=("$@")
if [ ${#revs[@]} -eq 0 ]; then
	revs=(HEAD)
fi

work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null || true; rm -rf "$work" || true; git -C "$root" worktree prune || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

names=()
for rev in "${revs[@]}"; do
	name="$(git rev-parse --short "$rev")"
	names+=("$name")
	bin="$work/bin/$name"
	mkdir -p "$bin"
	echo "== building $rev ($name)"
	git worktree add -q --detach "$work/src/$name" "$rev"
	(
		cd "$work/src/$name"
		go build -o "$bin/converge" ./cmd/converge
		(cd scenarios && go test -c -o "$bin/baseline.test" .)
		(cd examples/webapp && go test -c -o "$bin/webapp.test" .)
		(cd examples/mirror && go test -c -o "$bin/mirror.test" .)
	)
done

# explore NAME DIR FLAGS REV prints "NAME[-inputs] REV POINTS ALL RUNNING".
# It runs in the revision's own checkout: a test binary reads its testdata
# from the folder it runs in.
explore() {
	local name="$1" dir="$2" flags="$3" rev="$4" bin="$work/bin/$4" out line cpu
	# The CPU its processes used (user and system, the CLI's included),
	# from the subshell's children's times: steadier than its wall time
	# on a machine whose pace drifts.
	cpu="$(
		cd "$work/src/$rev/$dir" || exit 1
		"$bin/converge" explore "$name" $flags --parallel 2 \
			--test-binary "$bin/$name.test" --report "$work/report" >"$work/out" 2>&1 || exit 1
		times >"$work/times" # a builtin: a pipe would run it in a subshell without children
		sed -n 2p "$work/times"
	)" || {
		echo "explore $name $flags ($rev) failed:" >&2
		tail -n 20 "$work/out" >&2
		return 1
	}
	out="$(cat "$work/out")"
	cpu="$(awk '{ s = 0; for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); s += t[1] * 60 + t[2] } printf "%.2f", s }' <<<"$cpu")"
	line="$(sed -nE "s/^points per second: ([0-9.]+) in all \(([0-9]+) in [0-9.]+s[^)]*\), ([0-9.]+) while the points ran.*/$name${flags:+-inputs} $rev \2 \1 \3 $cpu/p" <<<"$out")"
	if [ -z "$line" ]; then
		echo "explore $name $flags ($rev) printed no pace with points:" >&2
		tail -n 20 <<<"$out" >&2
		return 1
	fi
	echo "$line"
}

results="$work/results"
for r in $(seq 1 "$rounds"); do
	echo "== round $r of $rounds"
	for name in "${names[@]}"; do
		explore webapp examples/webapp --inputs "$name"
		explore mirror examples/mirror --inputs "$name"
		explore webapp examples/webapp "" "$name"
		explore mirror examples/mirror "" "$name"
		explore baseline scenarios "" "$name"
	done >>"$results"
done

echo
echo "$(nproc) cores, $(date -u +%F), $rounds rounds; points per second, and CPU seconds (median)"
printf '%-15s %-9s %-8s %-12s %-12s %s\n' exploration revision points "in all" "points ran" "CPU s"
awk '
	function lo(a, b) { return a == "" || b + 0 < a + 0 ? b : a }
	function hi(a, b) { return a == "" || b + 0 > a + 0 ? b : a }
	{
		k = $1 " " $2
		if (!(k in seen)) { seen[k] = 1; order[n++] = k }
		plo[k] = lo(plo[k], $3); phi[k] = hi(phi[k], $3)
		alo[k] = lo(alo[k], $4); ahi[k] = hi(ahi[k], $4)
		rlo[k] = lo(rlo[k], $5); rhi[k] = hi(rhi[k], $5)
		cpu[k, ++m[k]] = $6
	}
	function median(k,   i, j, t, c) {
		c = m[k]
		for (i = 2; i <= c; i++)
			for (j = i; j > 1 && cpu[k, j - 1] + 0 > cpu[k, j] + 0; j--) {
				t = cpu[k, j]; cpu[k, j] = cpu[k, j - 1]; cpu[k, j - 1] = t
			}
		return c % 2 ? cpu[k, (c + 1) / 2] : sprintf("%.2f", (cpu[k, c / 2] + cpu[k, c / 2 + 1]) / 2)
	}
	END {
		for (i = 0; i < n; i++) {
			k = order[i]; split(k, f, " ")
			pts = plo[k] == phi[k] ? plo[k] : plo[k] "-" phi[k]
			printf "%-15s %-9s %-8s %-12s %-12s %s\n", f[1], f[2], pts, alo[k] "-" ahi[k], rlo[k] "-" rhi[k], median(k)
		}
	}' "$results" | sort -s -k1,1
