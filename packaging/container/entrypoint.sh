#!/bin/sh
# The Dockhand image's entrypoint (packaging/container/Containerfile): prepares what the
# programs need in a container, then replaces itself with the command it is given
# (`dockhand ...` or `dockhand-driver ...`), which keeps its pid.
#
#   DOCKHAND_RUN_DIR       a private, writable directory (default /run/dockhand; in Kubernetes
#                          an emptyDir): the secret copy and the pid file go there; where it
#                          cannot be written, a new private directory in $TMPDIR or /tmp
#   DOCKHAND_SECRET_SOURCE the cluster secret as mounted (a Kubernetes Secret volume: a symbolic
#                          link, readable by the pod's group). The programs take only a regular
#                          file readable by its owner alone, so it is copied to
#                          $DOCKHAND_RUN_DIR/cluster.secret (mode 0600) and
#                          DOCKHAND_AUTH_SECRET_FILE is set to that copy (the agent reads it;
#                          give the driver --auth-secret-file with the same path)
#
# The pid of the command is written to $DOCKHAND_RUN_DIR/dockhand.pid, where decommission.sh
# (the pod's preStop hook) finds it.
set -eu
run_dir="${DOCKHAND_RUN_DIR:-/run/dockhand}"

if [ $# -eq 0 ]; then
  echo "dockhand entrypoint: no command given (e.g. dockhand --config FILE)" >&2
  exit 64
fi
if ! mkdir -p "$run_dir" 2>/dev/null || [ ! -w "$run_dir" ]; then
  # Not in Kubernetes, with /run a fresh tmpfs the user cannot write: a private one in /tmp
  # (decommission.sh then finds the agent by its name).
  run_dir="$(mktemp -d "${TMPDIR:-/tmp}/dockhand-run.XXXXXX")"
  echo "dockhand entrypoint: ${DOCKHAND_RUN_DIR:-/run/dockhand} is not writable; using $run_dir" >&2
fi

if [ -n "${DOCKHAND_SECRET_SOURCE:-}" ]; then
  if [ ! -r "$DOCKHAND_SECRET_SOURCE" ]; then
    echo "dockhand entrypoint: cannot read the cluster secret $DOCKHAND_SECRET_SOURCE" \
         "(DOCKHAND_SECRET_SOURCE)" >&2
    exit 2
  fi
  secret="$run_dir/cluster.secret"
  rm -f "$secret"
  (umask 077 && cat "$DOCKHAND_SECRET_SOURCE" > "$secret")
  DOCKHAND_AUTH_SECRET_FILE="$secret"
  export DOCKHAND_AUTH_SECRET_FILE
fi

echo "$$" > "$run_dir/dockhand.pid"
exec "$@"
