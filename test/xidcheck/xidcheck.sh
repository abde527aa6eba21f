#!/bin/sh
# xidcheck: `make test` leaves the host's kernel log without a new
# "NVRM: Xid" line. A test that wrote one there would page the host's
# operators (an Xid 79 is a GPU fallen off the bus) and show in its crash
# snapshots; the tests write harmless lines to /dev/kmsg instead
# (docs/development.md).
#
#   xidcheck.sh mark STATE    before the tests: note where the log ends
#   xidcheck.sh check STATE   after them: fail, listing them, on the
#                             "NVRM: Xid" lines logged since
#
# Lines are told apart by their kernel timestamps, so Xid lines from before
# the mark (earlier runs, a real GPU) do not count, and neither does the
# ring dropping old records meanwhile. Where dmesg cannot be read (not root
# with kernel.dmesg_restrict=1, a container), one line says so and the
# check is skipped, except under CI=true as root, where that fails.
# $DMESG replaces dmesg (the tests of this script).
set -eu

dmesg=${DMESG:-dmesg}
usage="usage: xidcheck.sh mark|check STATE"
[ $# -eq 2 ] || { echo "$usage" >&2; exit 2; }
state=$2

# unreadable says the log cannot be read (why: $1) and skips the check, or
# fails it under CI=true as root.
unreadable() {
	if [ "${CI:-}" = true ] && [ "$(id -u)" = 0 ]; then
		echo "xidcheck: cannot read the kernel log under CI=true as root ($1): the check must run" >&2
		exit 1
	fi
	echo "xidcheck: the kernel log was not checked for new NVRM: Xid lines: dmesg cannot be read here ($1)" >&2
	exit 0
}

# stamps prints the kernel timestamp (seconds) of each line of the log on
# stdin that has one.
stamps() {
	sed -n 's/^\[ *\([0-9][0-9]*\.[0-9]*\)\].*/\1/p'
}

case $1 in
mark)
	mkdir -p "$(dirname "$state")"
	if ! log=$($dmesg 2>&1); then
		echo unreadable >"$state"
		unreadable "$(printf '%s\n' "$log" | head -n 1)"
	fi
	last=$(printf '%s\n' "$log" | stamps | tail -n 1)
	before=$(printf '%s\n' "$log" | grep -c 'NVRM: Xid' || true)
	echo "${last:-0} $before" >"$state"
	;;
check)
	read -r since before <"$state" || { echo "xidcheck: no mark in $state (run xidcheck.sh mark first)" >&2; exit 2; }
	[ "$since" != unreadable ] || exit 0 # said so at the mark
	if ! log=$($dmesg 2>&1); then
		unreadable "$(printf '%s\n' "$log" | head -n 1)"
	fi
	first=$(printf '%s\n' "$log" | stamps | head -n 1)
	if [ "$since" != 0 ] && [ -n "$first" ] && awk -v a="$first" -v b="$since" 'BEGIN { exit !(a > b) }'; then
		echo "xidcheck: the kernel log's ring dropped records logged during the tests (its oldest is at ${first} s, the tests began after ${since} s): those were not checked" >&2
	fi
	new=$(printf '%s\n' "$log" | awk -v since="$since" '
		match($0, /^\[ *[0-9]+\.[0-9]+\]/) && index($0, "NVRM: Xid") {
			if (substr($0, 2, RLENGTH - 2) + 0 > since + 0) print
		}')
	if [ -n "$new" ]; then
		n=$(printf '%s\n' "$new" | wc -l)
		echo "xidcheck: $n NVRM: Xid line(s) logged in the host's kernel log during the tests (a test wrote them, or something else on this host did meanwhile):" >&2
		printf '%s\n' "$new" >&2
		exit 1
	fi
	echo "xidcheck: no NVRM: Xid line logged in the kernel log during the tests ($before from before them)"
	;;
*)
	echo "$usage" >&2
	exit 2
	;;
esac
