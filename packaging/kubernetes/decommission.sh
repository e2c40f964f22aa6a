#!/bin/sh
# Decommissions the Dockhand agent of this container and waits for it to leave: the pod's
# preStop hook (agents.yaml), as Spark's decom.sh is for its executors. Also usable by hand:
#   kubectl exec dockhand-agent-1 -- /usr/share/dockhand/kubernetes/decommission.sh
#
# Usage: decommission.sh [--wait SECONDS] [--pid-file FILE | --pid PID] [--signal SIG]
#                        [--log FILE]
#   --wait      how long to wait for the agent to exit (default 285; 0: do not wait)
#   --pid-file  where the image's entrypoint wrote the agent's pid (default
#               $DOCKHAND_RUN_DIR/dockhand.pid, /run/dockhand/dockhand.pid)
#   --pid       the agent's pid; without either, PID 1 when it is the agent, else the one
#               process named dockhand
#   --signal    the agent's decommission.signal (default PWR)
#   --log       also append each line to FILE (the pod's /proc/1/fd/1: the lines then show in
#               `kubectl logs`, which a hook's own output does not)
#
# It sends the signal once, then waits until the agent has exited. The agent, on SIGPWR, stops
# taking tasks, lets the running ones finish, moves its blocks to its peers, tells the driver
# and exits 0 (10 when its decommission.deadline_ms passed first).
# Exit: 0 the agent exited; 1 it still ran after --wait seconds; 2 no agent found, bad usage.
set -u

wait_s=285
pid=""
pid_file=""
signal=PWR
log=""

say() {
  line="dockhand decommission: $*"
  echo "$line" >&2
  if [ -n "$log" ]; then
    { echo "$line" >> "$log"; } 2>/dev/null || true
  fi
}
usage() {
  echo "usage: decommission.sh [--wait SECONDS] [--pid-file FILE | --pid PID] [--signal SIG] [--log FILE]" >&2
  exit 2
}
is_number() {
  case "$1" in
    "" | *[!0-9]*) return 1 ;;
    *) return 0 ;;
  esac
}

while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage
  case "$1" in
    --wait) wait_s="$2" ;;
    --pid) pid="$2" ;;
    --pid-file) pid_file="$2" ;;
    --signal) signal="${2#SIG}" ;;
    --log) log="$2" ;;
    *) usage ;;
  esac
  shift 2
done
is_number "$wait_s" || { echo "decommission.sh: --wait: expected seconds, got '$wait_s'" >&2; exit 2; }

# The process's name, or nothing when it is gone or a zombie (exited, not yet reaped).
process_name() {
  [ -r "/proc/$1/stat" ] || return 0
  state=$(sed -n 's/^.*) \([A-Za-z]\) .*$/\1/p' "/proc/$1/stat" 2>/dev/null)
  [ "$state" = Z ] && return 0
  [ "$state" = X ] && return 0
  cat "/proc/$1/comm" 2>/dev/null || true
}

if [ -z "$pid" ]; then
  [ -n "$pid_file" ] || pid_file="${DOCKHAND_RUN_DIR:-/run/dockhand}/dockhand.pid"
  if [ -r "$pid_file" ]; then
    pid=$(head -n 1 "$pid_file" | tr -d ' \n')
    is_number "$pid" || { say "pid file $pid_file holds '$pid', not a pid"; exit 2; }
  elif [ "$(process_name 1)" = dockhand ]; then
    pid=1
  else
    for dir in /proc/[0-9]*; do
      candidate="${dir#/proc/}"
      if [ "$(process_name "$candidate")" = dockhand ]; then
        [ -z "$pid" ] || { say "more than one dockhand process ($pid, $candidate): give --pid"; exit 2; }
        pid="$candidate"
      fi
    done
    [ -n "$pid" ] || { say "no agent: no pid file $pid_file and no dockhand process"; exit 2; }
  fi
fi
is_number "$pid" || { echo "decommission.sh: --pid: expected a pid, got '$pid'" >&2; exit 2; }

# A pid file outlives its process, and a pid is reused: only a live dockhand is signalled.
name=$(process_name "$pid")
if [ -z "$name" ]; then
  say "the agent (pid $pid) is not running: nothing to do"
  exit 0
fi
if [ "$name" != dockhand ]; then
  say "pid $pid is '$name', not the agent (dockhand): not signalled"
  exit 2
fi

say "sending SIG$signal to the agent (pid $pid); waiting up to ${wait_s}s for it to exit"
if ! kill -s "$signal" "$pid"; then
  say "could not signal pid $pid"
  exit 2
fi

# Wait in steps of 0.2 s (1 s where sleep takes only whole seconds).
step=0.2
sleep "$step" 2>/dev/null || step=1
start=$(date +%s)
while [ -n "$(process_name "$pid")" ]; do
  now=$(date +%s)
  if [ $((now - start)) -ge "$wait_s" ]; then
    say "the agent (pid $pid) still runs after ${wait_s}s; leaving it to the container's stop"
    exit 1
  fi
  sleep "$step"
done
say "the agent (pid $pid) exited after $(($(date +%s) - start))s"
exit 0
