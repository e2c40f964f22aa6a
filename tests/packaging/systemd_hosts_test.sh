#!/usr/bin/env bash
# systemd on many hosts, on one machine: the installed package's agent on N "hosts", each a
# network, mount, PID, UTS and cgroup namespace booted by the real systemd, with its own address
# on a bridge, its own /etc/dockhand (the package's agent.json plus a fragment in agent.d/) and
# its own /var/lib/dockhand. The unit is the packaged dockhand.service, started with systemctl.
# One driver, in its own namespace, runs a two-stage job on the hosts; meanwhile
#   * one host is cut off (its link goes down): the driver drops it after agent_timeout_ms and
#     reruns the maps whose blocks lived only there; the agent gives up on the silent driver and
#     systemd restarts it until the link comes back, when it registers again;
#   * one host leaves with `systemctl kill --kill-whom=main --signal=SIGPWR dockhand`: it
#     decommissions (its running task finishes, its blocks move to the peer that stays), exits 0
#     and systemd does not restart it.
#   * with DOCKHAND_UPGRADE_DEB set (the package check makes one), the host that stays is
#     upgraded first with `dpkg -i`: its agent restarts in place (same PID, no unit restart)
#     and resumes with its blocks and its running task, which goes on in the new program.
# The job must end with the right sum. Then the last host shuts its agent down with `systemctl
# stop` under the recipe's KillSignal=SIGPWR drop-in: its blocks move to the host that came
# back. docs/operations.md ("systemd on many hosts") is the recipe this follows.
#
# Usage (root, with the dockhand package installed): tests/packaging/systemd_hosts_test.sh
# Exit 0: passed; 77: skipped (not root, no package, or namespaces cannot be made here, with
# the reason); anything else: failed.
set -euo pipefail

hosts=(h1 h2 h3)
subnet=10.231.7
driver_ip=$subnet.1
driver_port=7077
id=$(($$ % 100000))

say() { echo "== systemd hosts: $*"; }
skip() { echo "SKIPPED: systemd hosts: $*"; exit 77; }
fail() {
  echo "FAILED: systemd hosts: $*" >&2
  dump_logs >&2 || true
  exit 1
}

[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, mounts, a systemd per host)"
command -v dockhand >/dev/null && [ -f /lib/systemd/system/dockhand.service ] \
  || skip "the dockhand package is not installed"
for tool in ip unshare nsenter python3; do
  command -v "$tool" >/dev/null || skip "$tool is missing"
done
[ -x /lib/systemd/systemd ] || skip "systemd is not installed"
unshare --net true 2>/dev/null || skip "this machine does not allow network namespaces"

# Outside /tmp and /var/tmp: the unit's PrivateTmp hides both from the agent and its tasks.
root="$(mktemp -d /srv/dockhand-hosts.XXXXXX)"
chmod 0755 "$root"
ns_driver="dh$id-driver"
bridge="dh${id}br"
driver_pid=""
declare -A ns_of init_of holder_of ip_of cgroup_of

# The cgroup layout this machine has: cgroup v2 only, or v1 with systemd's named hierarchy.
if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
  cgroup_roots=(/sys/fs/cgroup)
else
  cgroup_roots=(/sys/fs/cgroup/systemd)
  [ -d /sys/fs/cgroup/unified ] && cgroup_roots+=(/sys/fs/cgroup/unified)
fi

in_host() { local h=$1; shift; nsenter -t "${init_of[$h]}" -a "$@"; }
unit_show() { in_host "$1" systemctl show -p "$2" --value dockhand; }
# unit_test HOST PROPERTY OP VALUE: test(1) on a property of the host's dockhand.service.
unit_test() { test "$(unit_show "$1" "$2")" "$3" "$4"; }

dump_logs() {
  echo "---- driver log"; tail -n 60 "$root/driver.log" 2>/dev/null || true
  for h in "${hosts[@]}"; do
    [ -n "${init_of[$h]:-}" ] || continue
    echo "---- $h: systemctl status dockhand"
    in_host "$h" systemctl --no-pager status dockhand 2>&1 | tail -n 5 || true
    echo "---- $h: journalctl -u dockhand"
    in_host "$h" journalctl --no-pager -u dockhand 2>&1 | tail -n 40 || true
  done
}

cleanup() {
  set +e
  [ -n "$driver_pid" ] && kill "$driver_pid" 2>/dev/null
  for h in "${hosts[@]}"; do
    [ -n "${init_of[$h]:-}" ] && in_host "$h" systemctl poweroff --no-block >/dev/null 2>&1
  done
  for h in "${hosts[@]}"; do
    local pid=${holder_of[$h]:-}
    [ -n "$pid" ] || continue
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    # A systemd that did not power off: killing the namespace's first process ends them all.
    [ -n "${init_of[$h]:-}" ] && kill -KILL "${init_of[$h]}" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  [ -n "$driver_pid" ] && wait "$driver_pid" 2>/dev/null
  for h in "${hosts[@]}"; do
    [ -n "${ns_of[$h]:-}" ] && ip netns del "${ns_of[$h]}" 2>/dev/null
    for dir in ${cgroup_of[$h]:-}; do
      [ -d "$dir" ] && find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null
    done
  done
  ip netns del "$ns_driver" 2>/dev/null
  rm -rf "$root"
}
trap cleanup EXIT

# wait_for SECONDS WHAT COMMAND...: polls COMMAND every 0.2 s until it succeeds.
wait_for() {
  local seconds=$1 what=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || fail "no $what after ${seconds} s"
    if [ -n "$driver_pid" ] && ! kill -0 "$driver_pid" 2>/dev/null; then
      fail "the driver exited while waiting for $what"
    fi
    sleep 0.2
  done
}

# The driver's control API, read from the driver's namespace: `executors EXPR` prints EXPR
# evaluated over GET /v1/executors (d: the answer, by_id: executor_id -> entry).
cat > "$root/executors.py" <<'PY'
import json, sys, urllib.request
d = json.load(urllib.request.urlopen(sys.argv[1] + "/v1/executors", timeout=5))
by_id = {e["executor_id"]: e for e in d["executors"]}
print(eval(sys.argv[2]))
PY
executors() {
  ip netns exec "$ns_driver" python3 "$root/executors.py" "http://$driver_ip:$driver_port" "$1"
}
executors_say() { [ "$(executors "$1")" = True ]; }

# ---- the network: a bridge in the driver's namespace, a veth pair per host --------------------
say "network: bridge $bridge, driver $driver_ip, hosts $subnet.11-$((10 + ${#hosts[@]}))"
ip netns add "$ns_driver"
ip -n "$ns_driver" link set lo up
ip -n "$ns_driver" link add "$bridge" type bridge
ip -n "$ns_driver" addr add "$driver_ip/24" dev "$bridge"
ip -n "$ns_driver" link set "$bridge" up
n=10
for h in "${hosts[@]}"; do
  n=$((n + 1))
  ns_of[$h]="dh$id-$h"
  ip_of[$h]="$subnet.$n"
  ip netns add "${ns_of[$h]}"
  ip link add "dh$id$h" type veth peer name eth0 netns "${ns_of[$h]}"
  ip link set "dh$id$h" netns "$ns_driver"
  ip -n "$ns_driver" link set "dh$id$h" master "$bridge" up
  ip -n "${ns_of[$h]}" link set lo up
  ip -n "${ns_of[$h]}" addr add "${ip_of[$h]}/24" dev eth0
  ip -n "${ns_of[$h]}" link set eth0 up
done

# ---- each host: its own /etc/dockhand, /var/lib/dockhand, /run, /tmp; then systemd as PID 1 ----
cat > "$root/boot.sh" <<'BOOT'
#!/bin/bash
# Runs as the first process of a host's new namespaces; ends by becoming its systemd.
set -euo pipefail
dir=$1
shift
mount --make-rprivate /
mount -t proc proc /proc
mount -t tmpfs -o mode=0755 tmpfs /run
# systemd-tmpfiles empties /tmp at boot: this host's own.
mount -t tmpfs -o mode=1777 tmpfs /tmp
if [ -d /var/log/journal ]; then mount -t tmpfs tmpfs /var/log/journal; fi
mount --bind "$dir/etc-dockhand" /etc/dockhand
mount --bind "$dir/state" /var/lib/dockhand
mount --bind "$dir/hostname" /etc/hostname
mount --bind "$dir/machine-id" /etc/machine-id
mount -t tmpfs -o mode=0755 tmpfs /sys/fs/cgroup
if [ "$1" = v2 ]; then
  mount -t cgroup2 cgroup2 /sys/fs/cgroup
else
  mkdir /sys/fs/cgroup/systemd
  mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
  if [ "$2" = unified ]; then
    mkdir /sys/fs/cgroup/unified
    mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified
  fi
fi
# The host boots its basics only (journald, tmpfiles, ...); the agent is started by hand. Its
# machine id is its own (bound over the shared one), not one to commit to disk.
mkdir -p /run/systemd/system
ln -s /dev/null /run/systemd/system/systemd-machine-id-commit.service
cat > /run/systemd/system/dockhand-host.target <<'UNIT'
[Unit]
Description=A test host: the basic system, nothing else
Requires=basic.target
After=basic.target
UNIT
hostname "$(cat "$dir/hostname")"
exec env container=dockhand-hosts /lib/systemd/systemd --system --unit=dockhand-host.target
BOOT
chmod 0755 "$root/boot.sh"
cgroup_layout=(v1 none)
if [ "${cgroup_roots[0]}" = /sys/fs/cgroup ]; then
  cgroup_layout=(v2 none)
elif [ ${#cgroup_roots[@]} -gt 1 ]; then
  cgroup_layout=(v1 unified)
fi

for h in "${hosts[@]}"; do
  dir="$root/$h"
  mkdir -p "$dir/state"
  cp -a /etc/dockhand "$dir/etc-dockhand"
  mkdir -p "$dir/etc-dockhand/agent.d"
  # The host's own settings in a fragment; the package's agent.json stays as installed.
  cat > "$dir/etc-dockhand/agent.d/50-host.json" <<JSON
{
  "driver_url": "ws://$driver_ip:$driver_port/",
  "app_id": "hosts",
  "executor_id": "$h",
  "cores": 2,
  "bind_address": "${ip_of[$h]}",
  "hostname": "${ip_of[$h]}",
  "block_port": 7337,
  "reconnect_timeout_ms": 8000,
  "decommission": {"enabled": true, "migration": ["peer"], "deadline_ms": 60000}
}
JSON
  chown -R root:dockhand "$dir/etc-dockhand"
  chmod 0750 "$dir/etc-dockhand" "$dir/etc-dockhand/agent.d"
  chmod 0640 "$dir/etc-dockhand/agent.d/50-host.json"
  chown dockhand:dockhand "$dir/state"
  chmod 0711 "$dir/state"
  echo "$h" > "$dir/hostname"
  python3 -c 'import uuid; print(uuid.uuid4().hex)' > "$dir/machine-id"
  cgroup_of[$h]=""
  for r in "${cgroup_roots[@]}"; do
    mkdir "$r/dockhand-hosts-$id-$h" 2>/dev/null || skip "cannot make a cgroup under $r"
    cgroup_of[$h]="${cgroup_of[$h]} $r/dockhand-hosts-$id-$h"
  done
  (
    for dir_cg in ${cgroup_of[$h]}; do echo "$BASHPID" > "$dir_cg/cgroup.procs"; done
    exec ip netns exec "${ns_of[$h]}" unshare --pid --fork --kill-child --mount --uts --ipc \
      --cgroup "$root/boot.sh" "$dir" "${cgroup_layout[@]}"
  ) > "$dir/console.log" 2>&1 &
  holder_of[$h]=$!
done
for h in "${hosts[@]}"; do
  wait_for 10 "systemd on $h" pgrep -P "${holder_of[$h]}"
  init_of[$h]="$(pgrep -P "${holder_of[$h]}")"
done
for h in "${hosts[@]}"; do
  state=""
  deadline=$((SECONDS + 90))
  until [ "$state" = running ] || [ "$state" = degraded ]; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      # Not the package's doing: this machine cannot run a systemd in namespaces.
      cat "$root/$h/console.log"
      skip "systemd did not boot in a namespace here (is-system-running: ${state:-no answer})"
    fi
    sleep 0.5
    state="$(in_host "$h" systemctl is-system-running 2>/dev/null || true)"
  done
  say "$h booted ($state), systemd pid ${init_of[$h]}, address ${ip_of[$h]}"
  if [ "$state" != running ]; then
    failed_units="$(in_host "$h" systemctl --failed --plain --no-legend | awk '{print $1}')"
    echo "   (failed units on $h: $(tr '\n' ' ' <<<"$failed_units"))"
  fi
done

# ---- the driver and its job ----------------------------------------------------------------
# Four maps split the word counts of the package's example data into two blocks each; a gate
# task (it waits for a file) writes a block both reduces also read, so the reduces wait until
# the test has cut a host off and decommissioned another.
data=/usr/share/doc/dockhand/examples/wordcount/data
job="$root/job"
mkdir -p "$job"
cat > "$job/map.sh" <<'SH'
#!/bin/sh
# map.sh INPUT MAP: the words of INPUT as "word 1" lines, split in two blocks by line number.
set -eu
out=${DOCKHAND_OUTPUT_DIR:?}
: > "$out/shuffle_0_$2_0"
: > "$out/shuffle_0_$2_1"
tr -s '[:space:]' '\n' < "$1" | grep -v '^$' |
  awk -v base="$out/shuffle_0_$2_" '{ print $1, 1 > (base (NR % 2)) }'
SH
cat > "$job/gate.sh" <<'SH'
#!/bin/sh
set -eu
i=0
while [ ! -e "$1" ]; do
  i=$((i + 1))
  [ "$i" -lt 1800 ] || { echo "no $1 after 180 s" >&2; exit 1; }
  sleep 0.1
done
: > "$DOCKHAND_OUTPUT_DIR/task_0_gate"
SH
cat > "$job/reduce.sh" <<'SH'
#!/bin/sh
set -eu
in=${DOCKHAND_INPUT_DIR:?}
cat "$in/shuffle_0_0_$1" "$in/shuffle_0_1_$1" "$in/shuffle_0_2_$1" "$in/shuffle_0_3_$1" |
  awk '{ total += $2 } END { print total + 0 }'
SH
python3 - "$job" "$data" "$root/gate" <<'PY'
import json, sys
job, data, gate = sys.argv[1:4]
tasks = [{"name": "map-%d" % m,
          "shell": "sh '%s/map.sh' '%s/part-%d.txt' %d" % (job, data, m + 1, m),
          "outputs": ["shuffle_0_%d_0" % m, "shuffle_0_%d_1" % m]} for m in range(4)]
tasks.append({"name": "gate", "shell": "sh '%s/gate.sh' '%s'" % (job, gate),
              "outputs": ["task_0_gate"]})
for r in range(2):
    tasks.append({"name": "reduce-%d" % r, "shell": "sh '%s/reduce.sh' %d" % (job, r),
                  "inputs": ["shuffle_0_%d_%d" % (m, r) for m in range(4)] + ["task_0_gate"]})
json.dump({"name": "hosts", "max_attempts": 3, "aggregate": "sum", "tasks": tasks},
          open(job + "/job.json", "w"), indent=2)
PY
chmod -R a+rX "$job"
# A host is lost after 4 s of silence and 5 s held (the defaults: 60 s and 30 s); its agent gives
# up after 8 s of trying to resume (reconnect_timeout_ms above; 60 s by default).
cat > "$root/driver.json" <<'JSON'
{"agent_timeout_ms": 4000, "heartbeat_interval_ms": 500, "agent_reconnect_grace_ms": 5000,
 "properties": {"dockhand.driver.timeout_ms": "4000"}}
JSON
# The hosts come up before their driver: each agent tries to reach it (connect_tries), exits 3
# and is started again by systemd (Restart=on-failure, no start limit) until the driver is there.
say "systemctl start dockhand on every host, with no driver yet"
for h in "${hosts[@]}"; do in_host "$h" systemctl start --no-block dockhand; done
for h in "${hosts[@]}"; do
  wait_for 60 "a restart of dockhand.service on $h while no driver listens" \
    unit_test "$h" NRestarts -ge 1
done
say "driver on $driver_ip:$driver_port"
ip netns exec "$ns_driver" dockhand-driver run "$job/job.json" --local-agents 0 \
  --min-agents ${#hosts[@]} --listen "$driver_ip:$driver_port" --config "$root/driver.json" \
  --timeout 240 --linger 120 --log-level info > "$root/driver.log" 2>&1 &
driver_pid=$!
# Type=notify: active once the driver has accepted the agent's registration.
for h in "${hosts[@]}"; do
  wait_for 60 "active dockhand.service on $h" unit_test "$h" ActiveState = active
done
say "all agents active: $(executors '{k: e["host"] for k, e in by_id.items()}')"

# ---- the maps' blocks are on the hosts; the gate holds the reduces ---------------------------
wait_for 60 "8 map blocks registered" executors_say 'sum(e["blocks"] for e in d["executors"]) == 8'
say "blocks per host: $(executors '{k: e["blocks"] for k, e in by_id.items()}')"
# Roles by where the maps' blocks landed: the host holding the most is cut off (its maps must
# run again), the next leaves by SIGPWR, the last stays.
read -r cut leaver stay <<<"$(executors \
  '" ".join(sorted(by_id, key=lambda k: (-by_id[k]["blocks"], k)))')"
say "roles: $cut is cut off, $leaver leaves by SIGPWR, $stay stays"
cut_blocks="$(executors "by_id['$cut']['blocks']")"
cut_restarts="$(unit_show "$cut" NRestarts)"

# ---- an upgrade in the middle of the job (DOCKHAND_UPGRADE_DEB, made by the package check) ----
# The package's maintainer scripts restart the agent in place: the same process runs the new
# program, keeps its blocks and resumes with the driver; systemd sees no restart.
if [ -n "${DOCKHAND_UPGRADE_DEB:-}" ]; then
  cp "$DOCKHAND_UPGRADE_DEB" "$root/upgrade.deb"
  pid_before="$(unit_show "$stay" MainPID)"
  restarts_before="$(unit_show "$stay" NRestarts)"
  stay_blocks_before="$(executors "by_id['$stay']['blocks']")"
  say "$stay: dpkg -i of a newer package, $stay_blocks_before blocks on it"
  in_host "$stay" env DEBIAN_FRONTEND=noninteractive dpkg -i --force-confold "$root/upgrade.deb" \
    > "$root/upgrade.log" 2>&1 || { cat "$root/upgrade.log"; fail "dpkg -i of the upgrade on $stay"; }
  wait_for 60 "$stay resumed at the driver after the upgrade" \
    grep -q "agent '$stay' resumed" "$root/driver.log"
  stay_journal="$(in_host "$stay" journalctl --no-pager -u dockhand)"
  grep -q "dockhand ${DOCKHAND_UPGRADE_PROGRAM_VERSION:-} starting" <<<"$stay_journal" \
    || fail "$stay's journal does not show the upgraded program starting"
  grep -q "received SIGUSR2: restarting in place" <<<"$stay_journal" \
    || fail "$stay's agent was not restarted in place"
  [ "$(unit_show "$stay" MainPID)" = "$pid_before" ] \
    || fail "$stay's MainPID changed from $pid_before to $(unit_show "$stay" MainPID)"
  [ "$(unit_show "$stay" NRestarts)" = "$restarts_before" ] \
    || fail "$stay's unit was restarted (NRestarts $restarts_before -> $(unit_show "$stay" NRestarts))"
  wait_for 10 "$stay's unit active after the upgrade" unit_test "$stay" ActiveState = active
  # Its running tasks went on in the new program: none was stopped.
  handed="$(grep -o "[0-9]* running task(s) go on in the next program; [0-9]* cannot" \
    <<<"$stay_journal" || true)"
  if [ -n "$handed" ]; then
    [[ "$handed" == *"; 0 cannot" ]] || fail "the upgrade stopped running tasks of $stay: $handed"
  fi
  wait_for 30 "$stay's $stay_blocks_before blocks listed again" executors_say \
    "by_id['$stay']['connected'] and by_id['$stay']['blocks'] == $stay_blocks_before"
  say "$stay upgraded in place: MainPID $pid_before, NRestarts $restarts_before, $stay_blocks_before blocks kept, ${handed:-no task running}"

  # ---- needrestart (Debian's package, installed by the package check) after the upgrade ------
  # The upgrade replaced the program and plugins that $leaver's agent still runs: needrestart
  # sees its service as outdated and, told to restart services automatically, defers it as the
  # package's /etc/needrestart/conf.d/dockhand.conf says, so the agent and its work stay. The
  # agent restarted in place maps the new files: needrestart has nothing against it.
  if command -v needrestart >/dev/null; then
    nr() { in_host "$1" env DEBIAN_FRONTEND=noninteractive needrestart "${@:2}" 2>&1; }
    leaver_pid="$(unit_show "$leaver" MainPID)"
    leaver_restarts="$(unit_show "$leaver" NRestarts)"
    listed="$(nr "$leaver" -b -l)" || fail "needrestart -b -l on $leaver: $listed"
    grep -qx "NEEDRESTART-SVC: dockhand.service" <<<"$listed" \
      || fail "needrestart does not see $leaver's agent as running replaced files: $listed"
    listed="$(nr "$stay" -b -l)" || fail "needrestart -b -l on $stay: $listed"
    if grep -qx "NEEDRESTART-SVC: dockhand.service" <<<"$listed"; then
      fail "$stay's agent restarted in place still runs replaced files: $(nr "$stay" -v -b -l)"
    fi
    auto="$(nr "$leaver" -r a -l -u NeedRestart::UI::stdio)" \
      || fail "needrestart -r a -l on $leaver: $auto"
    grep -A3 "Service restarts being deferred:" <<<"$auto" | grep -q "dockhand.service" \
      || fail "needrestart on $leaver did not defer dockhand.service: $auto"
    [ "$(unit_show "$leaver" MainPID)" = "$leaver_pid" ] \
      && [ "$(unit_show "$leaver" NRestarts)" = "$leaver_restarts" ] \
      || fail "needrestart restarted $leaver's agent (MainPID $leaver_pid -> $(unit_show "$leaver" MainPID))"
    say "needrestart -r a on $leaver: dockhand.service outdated, deferred, MainPID $leaver_pid kept"
  else
    say "(needrestart is not installed here: its step is skipped)"
  fi

  # ---- the upgrade as an rpm system makes it (DOCKHAND_UPGRADE_RPM, made by the package check):
  # dnf puts the package's files in place, then runs its %post with $1 = 2 (an upgrade). There
  # is no dnf on this machine: the files are unpacked from the rpm and its own %post is run.
  if [ -n "${DOCKHAND_UPGRADE_RPM:-}" ]; then
    for tool in rpm rpm2cpio cpio; do
      command -v "$tool" >/dev/null || fail "$tool is needed for the rpm upgrade step"
    done
    rpm_file="$(realpath "$DOCKHAND_UPGRADE_RPM")"
    rpm_root="$root/rpm-root"
    mkdir -p "$rpm_root"
    (cd "$rpm_root" && rpm2cpio "$rpm_file" | cpio -idm --quiet) || fail "cannot unpack $rpm_file"
    rpm -qp --qf '%{POSTIN}' "$rpm_file" > "$root/rpm-post.sh"
    grep -q dockhand-restart-in-place "$root/rpm-post.sh" \
      || fail "the rpm's %post does not restart the agents in place: $(cat "$root/rpm-post.sh")"
    pid_before="$(unit_show "$stay" MainPID)"
    restarts_before="$(unit_show "$stay" NRestarts)"
    resumed_before="$(grep -c "agent '$stay' resumed" "$root/driver.log" || true)"
    stay_blocks_before="$(executors "by_id['$stay']['blocks']")"
    say "$stay: the rpm's files in place, then its %post with \$1 = 2, as dnf upgrade runs it"
    # Replaced, not written over: running programs keep their files, as under rpm.
    (cd "$rpm_root" && find usr -type f) | while read -r f; do
      cp -a --remove-destination "$rpm_root/$f" "/$f"
    done
    in_host "$stay" sh "$root/rpm-post.sh" 2 > "$root/rpm-post.log" 2>&1 \
      || { cat "$root/rpm-post.log"; fail "the rpm's %post on $stay"; }
    resumed_more_than() { [ "$(grep -c "agent '$1' resumed" "$root/driver.log")" -gt "$2" ]; }
    wait_for 60 "$stay resumed at the driver after the rpm upgrade" \
      resumed_more_than "$stay" "$resumed_before"
    [ "$(unit_show "$stay" MainPID)" = "$pid_before" ] \
      || fail "$stay's MainPID changed from $pid_before on the rpm upgrade"
    [ "$(unit_show "$stay" NRestarts)" = "$restarts_before" ] \
      || fail "$stay's unit was restarted by the rpm upgrade"
    wait_for 30 "$stay's $stay_blocks_before blocks listed again after the rpm upgrade" \
      executors_say "by_id['$stay']['connected'] and by_id['$stay']['blocks'] == $stay_blocks_before"
    say "$stay upgraded in place by the rpm's %post: MainPID $pid_before, NRestarts $restarts_before, $stay_blocks_before blocks kept"
  fi
fi

# ---- the cut: its link goes down ---------------------------------------------------------
say "cutting $cut off (its link on the bridge goes down)"
ip -n "$ns_driver" link set "dh${id}$cut" down
wait_for 30 "loss of $cut at the driver" executors_say "'$cut' not in by_id"
blocks_per_host() { executors '{k: e["blocks"] for k, e in by_id.items()}'; }
say "the driver dropped $cut; blocks per host: $(blocks_per_host)"
# The maps whose blocks lived only on the cut host run again on the hosts that are left.
wait_for 60 "8 map blocks after the reruns" \
  executors_say 'sum(e["blocks"] for e in d["executors"]) == 8'
# The cut agent gives up on the silent driver (exit 5, driver-lost); systemd restarts it.
wait_for 60 "a restart of dockhand.service on $cut after the cut" \
  unit_test "$cut" NRestarts -gt "$cut_restarts"
say "$cut's agent gave up on the silent driver; systemd restarted it"

# ---- the leaver leaves: systemctl kill --kill-whom=main --signal=SIGPWR dockhand
say "$leaver: systemctl kill --kill-whom=main --signal=SIGPWR dockhand"
in_host "$leaver" systemctl kill --kill-whom=main --signal=SIGPWR dockhand
wait_for 30 "$leaver decommissioning at the driver" \
  executors_say "'$leaver' not in by_id or by_id['$leaver']['state'] == 'decommissioning'"
say "opening the gate"
touch "$root/gate"
wait_for 90 "$leaver's dockhand.service to end" unit_test "$leaver" ActiveState = inactive
result="$(unit_show "$leaver" Result) $(unit_show "$leaver" ExecMainStatus)"
result="$result $(unit_show "$leaver" NRestarts)"
[ "$result" = "success 0 0" ] \
  || fail "$leaver's unit: Result ExecMainStatus NRestarts = $result, expected success 0 0"
# (Read whole first: with pipefail, grep -q closing the pipe early would fail journalctl.)
leaver_journal="$(in_host "$leaver" journalctl --no-pager -u dockhand)"
grep -q "Sent signal SIGPWR to main process" <<<"$leaver_journal" \
  || fail "$leaver's journal does not show systemd sending SIGPWR to the agent"
grep -q "No running tasks, all blocks migrated" <<<"$leaver_journal" \
  || fail "$leaver's journal does not show its blocks migrated"
say "$leaver decommissioned and exited 0; systemd left it stopped"

# ---- the job ends on the host that stays, with the right sum -------------------------------
wait_for 120 "the job's report" grep -q "^job hosts " "$root/driver.log"
report="$(grep "^job hosts " "$root/driver.log")"
echo "$report"
[[ "$report" == *SUCCEEDED* ]] || fail "the job did not succeed"
[[ "$report" == *sum=406* ]] || fail "the job's sum is not 406"
if [ "$cut_blocks" -gt 0 ]; then
  [[ "$report" =~ [1-9][0-9]*\ map\ tasks\ rerun\ for\ lost\ blocks ]] \
    || fail "$cut held $cut_blocks blocks when cut off, yet no map ran again"
fi
grep -q "agent '$cut' lost" "$root/driver.log" || fail "the driver did not report $cut lost"
grep -q "agent '$leaver' finished decommissioning and left (0 block(s) still listed" \
  "$root/driver.log" \
  || fail "$leaver left with blocks the driver still listed on it"

# ---- the cut host's link comes back: its agent registers again
say "$cut's link comes back"
ip -n "$ns_driver" link set "dh${id}$cut" up
wait_for 90 "$cut registered again" executors_say "'$cut' in by_id"
wait_for 30 "active dockhand.service on $cut" unit_test "$cut" ActiveState = active
say "$cut registered again, after $(($(unit_show "$cut" NRestarts) - cut_restarts)) restart(s)"

# ---- the host that stayed shuts down with the decommission drop-in: its blocks move to the cut one
# The recipe's drop-in (KillSignal=SIGPWR): `systemctl stop`, as a shutdown does, decommissions.
stay_blocks="$(executors "by_id['$stay']['blocks']")"
[ "$stay_blocks" -gt 0 ] || fail "$stay holds no block to move"
in_host "$stay" mkdir -p /run/systemd/system/dockhand.service.d
printf '[Service]\nKillSignal=SIGPWR\n' \
  | in_host "$stay" tee /run/systemd/system/dockhand.service.d/decommission.conf >/dev/null
in_host "$stay" systemctl daemon-reload
say "$stay: systemctl stop dockhand, with KillSignal=SIGPWR ($stay_blocks blocks on it)"
timeout 120 nsenter -t "${init_of[$stay]}" -a systemctl stop dockhand \
  || fail "systemctl stop dockhand on $stay did not return"
[ "$(unit_show "$stay" Result) $(unit_show "$stay" ExecMainStatus)" = "success 0" ] \
  || fail "$stay's agent did not decommission and exit 0 on stop"
wait_for 30 "$stay's blocks on $cut" executors_say \
  "'$stay' not in by_id and by_id['$cut']['blocks'] == $stay_blocks"
grep -q "agent '$stay' finished decommissioning and left (0 block(s) still listed" \
  "$root/driver.log" || fail "$stay left with blocks the driver still listed on it"
say "$stay decommissioned on stop; its $stay_blocks blocks are on $cut"

# ---- the driver stops: the agent that is left exits 0 and stays stopped --------------------
kill -TERM "$driver_pid"
wait "$driver_pid" || true
driver_pid=""
wait_for 30 "$cut's dockhand.service to stop with the driver" \
  unit_test "$cut" ActiveState = inactive
[ "$(unit_show "$cut" Result) $(unit_show "$cut" ExecMainStatus)" = "success 0" ] \
  || fail "$cut's agent did not exit 0 when the driver stopped it"
say "OK"
