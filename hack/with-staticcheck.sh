#!/usr/bin/env bash
# Runs a command (the tests) with `make staticcheck` beside it, and fails
# if either fails; the command's output streams, staticcheck's (in LOG)
# follows it only when it found something.
#
# staticcheck starts at the lowest priority: from an empty cache it is
# about 200 s of CPU (its own build first), which the tests' builds would
# otherwise share the cores with while they keep both busy; niced, it
# takes the time the tests leave idle as they wait in real time. But a
# niced process beside busy ones at the normal priority gets almost
# nothing (under hack/ci-time.sh --load it had not built itself 23 min
# on), so once the command ends, a staticcheck still running is stopped
# and run again at the normal priority, going on from its cache. It runs
# in a session of its own (setsid) so that the whole of it, go list and
# compiles included, is stopped; without setsid or nice it runs beside
# the command at the normal priority.
#
# Usage: hack/with-staticcheck.sh LOG COMMAND [ARG...]
# MAKE and RACE are passed on to make staticcheck.
set -uo pipefail

log="$1"
shift
make="${MAKE:-make}"
lint=("$make" -s --no-print-directory staticcheck RACE="${RACE:-}")

pid=""
stop() {
	if [ -n "$pid" ]; then
		# Its session's group under setsid; the process alone without.
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		pid=""
	fi
}
trap stop EXIT
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM

niced=""
if command -v setsid >/dev/null && command -v nice >/dev/null; then
	niced=1
	setsid nice -n 19 "${lint[@]}" >"$log" 2>&1 &
else
	"${lint[@]}" >"$log" 2>&1 &
fi
pid=$!

echo "$*"
"$@"
status=$?

if [ -n "$niced" ] && kill -0 "$pid" 2>/dev/null; then
	stop
	echo "staticcheck: going on at the normal priority"
	"${lint[@]}" >"$log" 2>&1
	linted=$?
else
	wait "$pid"
	linted=$?
	pid=""
fi
if [ "$linted" != 0 ]; then
	cat "$log"
	echo "staticcheck failed (above; $log)"
	exit 1
fi
exit "$status"
