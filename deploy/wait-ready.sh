#!/usr/bin/env bash
# Waits until an HTTP endpoint answers 200, as `make up` does for the gateway's /readyz.
#
#   deploy/wait-ready.sh URL [TIMEOUT_SECONDS [LOG_FILE [PID_FILE]]]
#
# Fails after TIMEOUT_SECONDS (60), or as soon as the process in PID_FILE has exited, and
# then prints the last lines of LOG_FILE so the cause is on screen.
set -euo pipefail

url="${1:?usage: $0 URL [TIMEOUT_SECONDS [LOG_FILE [PID_FILE]]]}"
timeout="${2:-60}"
logfile="${3:-}"
pidfile="${4:-}"

fail() {
	printf 'wait-ready: %s\n' "$*" >&2
	if [[ -n "$logfile" && -f "$logfile" ]]; then
		printf 'wait-ready: last lines of %s:\n' "$logfile" >&2
		tail -n 40 "$logfile" >&2
	fi
	exit 1
}

deadline=$((SECONDS + timeout))
code=000
while :; do
	code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url" || true)"
	if [[ "$code" == 200 ]]; then
		printf 'wait-ready: %s answers 200\n' "$url" >&2
		exit 0
	fi
	if [[ -n "$pidfile" ]]; then
		pid="$(cat "$pidfile" 2>/dev/null || true)"
		if [[ ! "$pid" =~ ^[1-9][0-9]*$ ]] || ! kill -0 "$pid" 2>/dev/null; then
			fail "the processes exited before $url answered 200"
		fi
	fi
	((SECONDS < deadline)) || fail "$url did not answer 200 within ${timeout}s (last status $code)"
	sleep 0.5
done
