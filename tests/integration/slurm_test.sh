#!/usr/bin/env bash
# Dockhand under a real Slurm: a one-node cluster (munged, slurmctld, slurmd on 127.0.0.1,
# everything under a temp dir, ports picked free) runs packaging/slurm/dockhand.sbatch with
# the built programs:
#   (a) the word count (examples/wordcount/job.json) on 2 agents: the job completes with the
#       sum `cat examples/wordcount/data/*.txt | wc -w` gives;
#   (b) the two-stage job (examples/decommission/job.json: maps write shuffle blocks that the
#       reduces fetch from the other agent) likewise;
#   (c) scancel of a job whose tasks sleep: every agent, every task process (by pid and by
#       process group) and every agent work dir is gone within a bounded wait;
#   (d) the decommission signal (scancel --batch --signal=USR1): running tasks finish, the
#       agents leave, nothing is left;
#   (e) GPUs through Slurm's GRES: the node has two "GPUs" (device nodes made with mknod, so
#       Slurm's gres/gpu plugin sets CUDA_VISIBLE_DEVICES for each task as on a real GPU
#       node); with --gpus-per-task=1 each agent offers the GPU Slurm gave its task (the
#       `slurm` discovery plugin), and each Dockhand task asking for a GPU sees that one.
#   (f) `dockhand-slurm agents` in a batch job for a driver outside Slurm: the driver's word
#       count gets the sum, and the Slurm job completes when the driver stops its agents.
# Every daemon it started is stopped by pid at the end and its temp dir removed.
#
#   slurm_test.sh --bin-dir BUILD/bin --source-dir SOURCE
#
# Exits 77 (skipped) without root (slurmd needs it) or without munged, slurmctld, slurmd and
# the Slurm client commands (scripts/setup installs Debian's slurm-wlm and munge).
set -uo pipefail

readonly SKIP=77
bin_dir=""
source_dir=""
while [ $# -gt 0 ]; do
  case $1 in
    --bin-dir) bin_dir=$2; shift ;;
    --source-dir) source_dir=$2; shift ;;
    *) echo "slurm_test: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$bin_dir" ] && [ -n "$source_dir" ] || { echo "usage: $0 --bin-dir DIR --source-dir DIR" >&2; exit 2; }
bin_dir=$(cd "$bin_dir" && pwd)
source_dir=$(cd "$source_dir" && pwd)

export PATH="$PATH:/usr/sbin:/sbin"
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIPPED: slurmd needs root; run the test as root to run it"
  exit "$SKIP"
fi
for program in munged munge slurmctld slurmd sbatch squeue sinfo scancel srun python3; do
  if ! command -v "$program" >/dev/null; then
    echo "SKIPPED: $program is not installed (Debian: apt-get install slurm-wlm munge)"
    exit "$SKIP"
  fi
done
for program in dockhand dockhand-driver; do
  [ -x "$bin_dir/$program" ] || { echo "FAIL: $bin_dir/$program is not built" >&2; exit 1; }
done

tmp=$(mktemp -d /tmp/dockhand-slurm-test.XXXXXX)
chmod 755 "$tmp"  # munged wants its socket's directories searchable by all
daemon_pids=()
job_ids=()
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# Bounded wait: until COMMAND succeeds or SECONDS pass.
wait_for() {
  local seconds=$1
  shift
  local deadline=$((SECONDS + seconds))
  until "$@"; do
    [ "$SECONDS" -ge "$deadline" ] && return 1
    sleep 0.2
  done
}

alive() { kill -0 "$1" 2>/dev/null; }

stop_pid() {
  local pid=$1
  alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null
  wait_for 10 bash -c "! kill -0 $pid 2>/dev/null" || kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  return 0
}

# Every process of this test's cluster (daemons, slurmstepd, job processes, the external
# driver) is started with `env "$mark"`, which its children inherit and this shell lacks.
mark="DOCKHAND_SLURM_TEST=$tmp"
cluster_pids() {
  local files=(/proc/[0-9]*/environ)
  grep -laF -- "$mark" "${files[@]}" 2>/dev/null | sed -E 's|^/proc/([0-9]+)/environ$|\1|'
  return 0
}
no_jobs() { [ -z "$(squeue -h 2>/dev/null)" ]; }

cleanup() {
  local id pid stray
  if [ "${#job_ids[@]}" -gt 0 ]; then
    for id in "${job_ids[@]}"; do scancel "$id" 2>/dev/null; done
    wait_for 30 no_jobs || echo "cleanup: jobs still listed 30 s after scancel: $(squeue -h)" >&2
  fi
  # In reverse start order: the external driver, slurmd, slurmctld, munged.
  for ((i = ${#daemon_pids[@]} - 1; i >= 0; i--)); do stop_pid "${daemon_pids[$i]}"; done
  # A step slurmd left behind would outlive it: stop whatever is left, and count it.
  stray=$(cluster_pids | tr '\n' ' ')
  if [ -n "${stray// /}" ]; then
    sleep 2
    stray=$(cluster_pids | tr '\n' ' ')
  fi
  if [ -n "${stray// /}" ]; then
    fail "processes of the test's cluster left after its daemons stopped: $stray"
    for pid in $stray; do echo "  $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"; done
    for pid in $stray; do kill -KILL "$pid" 2>/dev/null; done
  fi
  if [ "$failures" -gt 0 ]; then
    for log in "$tmp"/log/*.log; do
      [ -f "$log" ] || continue
      echo "--- last lines of $log"
      tail -n 30 "$log"
    done
  fi
  rm -rf "$tmp"
  [ "$failures" -eq 0 ] || exit 1
}
trap cleanup EXIT
trap 'exit 1' TERM INT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# --- munged with its own key and socket --------------------------------------------------
mkdir -m 700 "$tmp/munge" "$tmp/state" "$tmp/spool" "$tmp/log"
mkdir -m 755 "$tmp/run"
mkdir -m 755 "$tmp/out" "$tmp/work"
head -c 1024 /dev/urandom >"$tmp/munge/munge.key"
chmod 600 "$tmp/munge/munge.key"
socket="$tmp/run/munge.socket"
env "$mark" munged -F --socket="$socket" --key-file="$tmp/munge/munge.key" \
  --log-file="$tmp/log/munged.log" --pid-file="$tmp/munge/munged.pid" \
  --seed-file="$tmp/munge/munged.seed" >"$tmp/log/munged.out" 2>&1 &
daemon_pids+=($!)
if ! wait_for 10 test -S "$socket"; then
  fail "munged did not create its socket within 10 s"
  cat "$tmp/log/munged.out" >&2
  exit 1
fi

# --- slurmctld and slurmd ---------------------------------------------------------------
ctld_port=$(free_port)
slurmd_port=$(free_port)
while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(free_port); done
: >"$tmp/plugstack.conf"
# Two GPUs for gres/gpu: character device nodes (those of /dev/null) named as NVIDIA's are.
gres_lines=""
node_gres=""
mkdir -m 755 "$tmp/dev"
if mknod "$tmp/dev/nvidia0" c 1 3 2>/dev/null && mknod "$tmp/dev/nvidia1" c 1 3 2>/dev/null; then
  echo "Name=gpu File=$tmp/dev/nvidia[0-1]" >"$tmp/gres.conf"
  gres_lines="GresTypes=gpu"
  node_gres="Gres=gpu:2"
else
  echo "note: mknod is not allowed here: the GPU part (e) is left out"
fi
# config_overrides: the node has the CPUs and memory written here whatever the machine has.
# linuxproc tracks a step's processes by descent: a task an agent leaves behind in its own
# process group is not found by Slurm, so the test sees it.
cat >"$tmp/slurm.conf" <<EOF
ClusterName=dockhand-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/run/slurmctld.pid
SlurmdPidFile=$tmp/run/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
PlugStackConfig=$tmp/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=10
MinJobAge=600
$gres_lines
NodeName=dhnode NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=4 RealMemory=1024 $node_gres State=UNKNOWN
PartitionName=test Nodes=dhnode Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$tmp/slurm.conf"
env "$mark" slurmctld -D -f "$SLURM_CONF" >"$tmp/log/slurmctld.out" 2>&1 &
daemon_pids+=($!)
env "$mark" slurmd -D -N dhnode -f "$SLURM_CONF" >"$tmp/log/slurmd.out" 2>&1 &
daemon_pids+=($!)
node_idle() { [ "$(sinfo -h -n dhnode -o %T 2>/dev/null)" = idle ]; }
if ! wait_for 30 node_idle; then
  fail "the node did not become idle within 30 s (sinfo: $(sinfo -h -o '%T %E' 2>&1))"
  exit 1
fi
echo "slurm: slurmctld on 127.0.0.1:$ctld_port, slurmd on :$slurmd_port, node idle"
# The end's check for strays finds the cluster's processes by their environment: it must see
# the daemons.
for pid in "${daemon_pids[@]}"; do
  cluster_pids | grep -x "$pid" >/dev/null || fail "daemon $pid is not found by its environment ($mark)"
done

# --- jobs ---------------------------------------------------------------------------------
# The agents and drivers are the built ones; sanitizer settings (ASAN_OPTIONS with its
# log_path, from the test preset) reach them through sbatch's environment (--export=ALL).
export PATH="$source_dir/packaging/slurm:$PATH"
# The jobs' TMPDIR, where the launcher keeps its secret and the driver its temp dir: checked
# empty after each job, as the agents' work dirs are.
mkdir -m 755 "$tmp/nodetmp"
export TMPDIR="$tmp/nodetmp"
leftovers() { ls -A "$tmp/work" "$tmp/nodetmp" | grep -v -e '^$' -e ':$'; }
no_leftovers() { [ -z "$(leftovers)" ]; }
launcher_options=(--bin-dir "$bin_dir" --driver-host 127.0.0.1 --agent-hostname 127.0.0.1
  --work-dir "$tmp/work" --timeout 120)

# Submits packaging/slurm/dockhand.sbatch for JOB.json with 2 agents; prints the job id.
# SBATCH_EXTRA: more sbatch options.
submit() {
  local name=$1 job=$2
  env "$mark" sbatch --parsable --export=ALL --job-name="$name" --ntasks=2 --cpus-per-task=1 --time=5 ${SBATCH_EXTRA:-} \
    --output="$tmp/out/$name.out" --chdir="$tmp/out" \
    "$source_dir/packaging/slurm/dockhand.sbatch" "$job" "${launcher_options[@]}"
}

job_state() { squeue -h -j "$1" -t all -o %T 2>/dev/null; }
job_ended() {
  case $(job_state "$1") in
    PENDING | RUNNING | CONFIGURING | COMPLETING | SUSPENDED | "") return 1 ;;
    *) return 0 ;;
  esac
}

expected_sum=$(cat "$source_dir"/examples/wordcount/data/*.txt | wc -w)

# Runs JOB.json to its end and checks the state and the sum.
run_job() {
  local name=$1 job=$2 id
  id=$(submit "$name" "$job") || { fail "$name: sbatch failed"; return; }
  job_ids+=("$id")
  if ! wait_for 90 job_ended "$id"; then
    fail "$name (job $id) did not end within 90 s (state $(job_state "$id"))"
    return
  fi
  local state
  state=$(job_state "$id")
  if [ "$state" != COMPLETED ]; then
    fail "$name (job $id) ended $state"
    cat "$tmp/out/$name.out" >&2
    return
  fi
  if ! grep -q "sum=$expected_sum\b" "$tmp/out/$name.out"; then
    fail "$name (job $id): no sum=$expected_sum in its output"
    cat "$tmp/out/$name.out" >&2
    return
  fi
  if [ -n "$(leftovers)" ]; then
    fail "$name (job $id) left files behind: $(leftovers)"
    return
  fi
  echo "ok: $name (job $id) COMPLETED with sum=$expected_sum"
}

run_job wordcount "$source_dir/examples/wordcount/job.json"
run_job two-stage "$source_dir/examples/decommission/job.json"

# (c) scancel while tasks run.
marker="dockhand-slurm-test-$$"
cat >"$tmp/slow.json" <<EOF
{"name": "slow", "max_attempts": 1,
 "tasks": [{"name": "s-0", "shell": "sleep 300; echo $marker"},
           {"name": "s-1", "shell": "sleep 300; echo $marker"},
           {"name": "s-2", "shell": "sleep 300; echo $marker"}]}
EOF
# Pids of processes whose command line (arguments separated by NUL) matches the Perl regular
# expression PATTERN; one grep over every /proc/PID/cmdline, listed before grep starts so that
# grep (whose own command line holds PATTERN) is not among them.
pids_with() {
  local files=(/proc/[0-9]*/cmdline)
  grep -laP -- "$1" "${files[@]}" 2>/dev/null | sed -E 's|^/proc/([0-9]+)/cmdline$|\1|'
  return 0
}
agent_pattern() { printf -- '--app-id\\x00slurm-%s\\x00' "$1"; }
# The process group of each pid (field 5 of /proc/PID/stat, the 3rd after the command name).
pgids_of() {
  local pid stat
  for pid in "$@"; do
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
    stat=${stat##*) }
    set -- $stat
    echo "$3"
  done
}
# Pids of every process (zombies aside) in one of the process groups in `groups`.
pids_in_groups() {
  [ "${#groups[@]}" -gt 0 ] || return 0
  cat /proc/[0-9]*/stat 2>/dev/null | awk -v groups=" ${groups[*]} " '
    { rest = $0; sub(/^.*\) /, "", rest); split(rest, f, " ");
      if (f[1] != "Z" && index(groups, " " f[3] " ") > 0) print $1 }'
}
tasks_running() { [ "$(pids_with "$marker" | wc -l)" -ge 2 ]; }

id=$(submit slow "$tmp/slow.json") || fail "slow: sbatch failed"
if [ -n "${id:-}" ]; then
  job_ids+=("$id")
  if ! wait_for 60 tasks_running; then
    fail "slow (job $id): two tasks were not running within 60 s (state $(job_state "$id"))"
    cat "$tmp/out/slow.out" >&2
  else
    agents=$(pids_with "$(agent_pattern "$id")")
    tasks=$(pids_with "$marker")
    mapfile -t groups < <(pgids_of $tasks | sort -u)
    echo "slow (job $id): agents $(echo $agents), task shells $(echo $tasks) in groups ${groups[*]}; scancel"
    scancel "$id"
    left_behind() {
      local rest
      rest=$(
        pids_with "$(agent_pattern "$id")"
        pids_with "$marker"
        pids_in_groups
      )
      [ -z "$rest" ]
    }
    if ! wait_for 30 left_behind; then
      fail "slow (job $id): processes left 30 s after scancel: $(pids_with "$(agent_pattern "$id")") $(pids_with "$marker") $(pids_in_groups)"
    elif ! wait_for 30 job_ended "$id"; then
      fail "slow (job $id) still $(job_state "$id") 30 s after scancel"
    elif ! wait_for 10 no_leftovers; then
      fail "slow (job $id) left files behind: $(leftovers)"
    else
      echo "ok: slow (job $id) $(job_state "$id"); no agent, task process or work dir left"
      grep -E '^(s-[0-2] |job slow|dockhand-slurm:)' "$tmp/out/slow.out" | sed 's/^/    /'
    fi
  fi
fi

# (d) the decommission signal: `scancel --batch --signal=USR1` (what sbatch --signal=B:USR1@N
# sends before the time limit) while two tasks run. The launcher asks the driver to
# decommission both agents: the running tasks finish, the third is never started, the agents
# leave on their own (srun ends), the launcher stops the driver and nothing is left.
drain_marker="dockhand-slurm-drain-$$"
cat >"$tmp/drain.json" <<EOF
{"name": "drain", "max_attempts": 1, "aggregate": "sum",
 "tasks": [{"name": "d-0", "shell": "sleep 8; echo 7 # $drain_marker"},
           {"name": "d-1", "shell": "sleep 8; echo 7 # $drain_marker"},
           {"name": "d-2", "shell": "sleep 8; echo 7 # $drain_marker"}]}
EOF
drain_running() { [ "$(pids_with "$drain_marker" | wc -l)" -ge 2 ]; }
id=$(submit drain "$tmp/drain.json") || fail "drain: sbatch failed"
if [ -n "${id:-}" ]; then
  job_ids+=("$id")
  if ! wait_for 60 drain_running; then
    fail "drain (job $id): two tasks were not running within 60 s (state $(job_state "$id"))"
    cat "$tmp/out/drain.out" >&2
  else
    scancel --batch --signal=USR1 "$id"
    drained() {
      [ -z "$(pids_with "$(agent_pattern "$id")")" ] && [ -z "$(pids_with "$drain_marker")" ]
    }
    if ! wait_for 60 drained; then
      fail "drain (job $id): agents or tasks still running 60 s after the decommission signal"
    elif ! wait_for 30 job_ended "$id"; then
      fail "drain (job $id) still $(job_state "$id") 30 s after its agents left"
    elif ! grep -q "decommissioning every agent" "$tmp/out/drain.out" ||
      [ "$(grep -cE '^d-[0-2] +FINISHED' "$tmp/out/drain.out")" -ne 2 ] ||
      grep -qE '^d-[0-2] +(FAILED|KILLED)' "$tmp/out/drain.out"; then
      fail "drain (job $id): expected the two running tasks FINISHED and none killed"
      cat "$tmp/out/drain.out" >&2
    elif ! grep -q "every agent has left (srun exit 0)" "$tmp/out/drain.out"; then
      fail "drain (job $id): the agents did not all leave with exit 0"
      cat "$tmp/out/drain.out" >&2
    elif [ -n "$(leftovers)" ]; then
      fail "drain (job $id) left files behind: $(leftovers)"
    else
      echo "ok: drain (job $id): the running tasks finished, the agents decommissioned and left"
      grep -E '^(d-[0-2] |job drain|dockhand-slurm:)' "$tmp/out/drain.out" | sed 's/^/    /'
    fi
  fi
fi

# (e) GPUs from Slurm's GRES.
if [ -n "$node_gres" ]; then
  cat >"$tmp/gpu.json" <<'EOF'
{"name": "gpu", "max_attempts": 1,
 "tasks": [{"name": "g-0", "resources": {"gpu": 1}, "shell": "echo \"$CUDA_VISIBLE_DEVICES\""},
           {"name": "g-1", "resources": {"gpu": 1}, "shell": "echo \"$CUDA_VISIBLE_DEVICES\""},
           {"name": "g-2", "resources": {"gpu": 1}, "shell": "echo \"$CUDA_VISIBLE_DEVICES\""}]}
EOF
  id=$(SBATCH_EXTRA=--gpus-per-task=1 submit gpu "$tmp/gpu.json") || fail "gpu: sbatch failed"
  if [ -n "${id:-}" ]; then
    job_ids+=("$id")
    if ! wait_for 90 job_ended "$id"; then
      fail "gpu (job $id) did not end within 90 s (state $(job_state "$id"))"
    elif [ "$(job_state "$id")" != COMPLETED ]; then
      fail "gpu (job $id) ended $(job_state "$id")"
      cat "$tmp/out/gpu.out" >&2
    else
      # Each agent found one GPU through the plugin; every task saw its agent's GPU, and the
      # two agents had different ones.
      found=$(grep -c "resource gpu: \[[01]\] found by slurm" "$tmp/out/gpu.out")
      seen=$(awk '/^g-[0-2] +FINISHED/ { print $3, $NF }' "$tmp/out/gpu.out" | sort -u)
      agents=$(echo "$seen" | awk '{ print $1 }' | sort -u | wc -l)
      gpus=$(echo "$seen" | awk '{ print $2 }' | sort -u | tr '\n' ' ')
      if [ "$found" -ne 2 ] || [ "$(echo "$seen" | wc -l)" -ne "$agents" ] ||
        [ "$(echo "$seen" | awk '$2 != "0" && $2 != "1"' | wc -l)" -ne 0 ] ||
        { [ "$agents" -eq 2 ] && [ "$gpus" != "0 1 " ]; }; then
        fail "gpu (job $id): expected each agent to offer the GPU Slurm gave it (agent, GPU seen: $seen)"
        cat "$tmp/out/gpu.out" >&2
      elif [ -n "$(leftovers)" ]; then
        fail "gpu (job $id) left files behind: $(leftovers)"
      else
        echo "ok: gpu (job $id) COMPLETED; agent and GPU seen by its tasks: $(echo $seen)"
      fi
    fi
  fi
fi

# (f) agents for a driver outside Slurm: `dockhand-driver run --local-agents 0` on this
# machine, `dockhand-slurm agents` in a batch job; the driver's job gets the sum, its end
# stops the agents and the Slurm job completes.
(umask 077 && head -c 32 /dev/urandom | base64 >"$tmp/cluster.secret")
env "$mark" "$bin_dir/dockhand-driver" run "$source_dir/examples/wordcount/job.json" --local-agents 0 \
  --min-agents 2 --listen 127.0.0.1:0 --port-file "$tmp/driver.port" --timeout 120 \
  --auth-secret-file "$tmp/cluster.secret" >"$tmp/out/external-driver.out" 2>&1 &
driver_pid=$!
daemon_pids+=("$driver_pid")  # stopped at the end, if the test ends early
if ! wait_for 30 test -s "$tmp/driver.port"; then
  fail "external driver: no port within 30 s"
  stop_pid "$driver_pid"
else
  id=$(env "$mark" sbatch --parsable --export=ALL --job-name=agents --ntasks=2 --cpus-per-task=1 --time=5 \
    --output="$tmp/out/agents.out" --chdir="$tmp/out" --wrap \
    "exec dockhand-slurm agents --driver-url ws://127.0.0.1:$(cat "$tmp/driver.port")/ --auth-secret-file $tmp/cluster.secret --bin-dir $bin_dir --agent-hostname 127.0.0.1 --work-dir $tmp/work") ||
    fail "agents: sbatch failed"
  if [ -n "${id:-}" ]; then
    job_ids+=("$id")
    if ! wait_for 90 job_ended "$id"; then
      fail "agents (job $id) did not end within 90 s (state $(job_state "$id"))"
    elif [ "$(job_state "$id")" != COMPLETED ]; then
      fail "agents (job $id) ended $(job_state "$id")"
      cat "$tmp/out/agents.out" >&2
    elif ! wait_for 30 bash -c "! kill -0 $driver_pid 2>/dev/null"; then
      fail "external driver still running 30 s after its agents' job ended"
    elif ! wait "$driver_pid" || ! grep -q "sum=$expected_sum\b" "$tmp/out/external-driver.out"; then
      fail "external driver: the job did not succeed with sum=$expected_sum"
      cat "$tmp/out/external-driver.out" "$tmp/out/agents.out" >&2
    elif [ -n "$(leftovers)" ]; then
      fail "agents (job $id) left files behind: $(leftovers)"
    else
      echo "ok: agents (job $id) COMPLETED; the external driver's job ended with sum=$expected_sum"
    fi
  fi
  stop_pid "$driver_pid"
fi

if [ "$failures" -gt 0 ]; then
  echo "slurm_test: $failures failure(s)" >&2
  exit 1
fi
echo "slurm_test: all passed"
