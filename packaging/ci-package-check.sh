#!/usr/bin/env bash
# Builds the dockhand and dockhand-dev packages and uses them the way an administrator does:
# lintian, systemd-analyze verify, install with dpkg, validate the shipped config, run a real
# job with the installed agent and driver (readiness through sd_notify included), build the SDK
# examples out of tree against dockhand-dev (plugins and a job library, which the installed
# agent's library runner then runs), purge, and check that nothing is left behind.
#
# Usage: packaging/ci-package-check.sh [BUILD_DIR]     (default: build/package)
# Runs as root on Debian 12: it installs packages and adds/removes the dockhand user. CI runs
# it after the tests (.ci/run); it is safe to run by hand on a machine you can do that on.
set -euo pipefail
# No `cmd | grep -q`: grep -q exits at its first match, the writer then dies of SIGPIPE and
# pipefail fails the check at random (it did, on rpm -qlp). `grep ... >/dev/null` reads it all.
cd "$(dirname "$0")/.."
src="$PWD"
build="${1:-build/package}"
jobs="${DOCKHAND_JOBS:-$(nproc)}"

step() { echo "== package-check: $*"; }
fail() { echo "package-check: FAIL: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "run as root: the check installs and purges the package"

work="$(mktemp -d /tmp/dockhand-package-check.XXXXXX)"
chmod 0755 "$work"
cleanup() {
  for pid in ${bg_pids:-}; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

step "tools"
tools=(lintian rpm cpio python3-jsonschema python3-yaml adduser man-db gzip systemd iproute2
  util-linux needrestart)
missing=()
for p in "${tools[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# A package left installed by an earlier run would hide what this one installs.
if dpkg-query -W dockhand >/dev/null 2>&1 || dpkg-query -W dockhand-dev >/dev/null 2>&1; then
  step "purging a dockhand installed before this check"
  dpkg --purge dockhand-dev dockhand >/dev/null
fi

if [ "${DOCKHAND_PACKAGE_SKIP_BUILD:-0}" = 1 ]; then
  # By hand, with a build tree configured with -DCMAKE_INSTALL_PREFIX=/usr and built.
  step "using the build in $build as it is"
else
  # Debian's hardening flags (fortify, stack protector, relro, bindnow), as a Debian package has.
  export DEB_BUILD_MAINT_OPTIONS=hardening=+all
  # Warnings are not errors here: the dev build before this one enforces them.
  step "build (Release, prefix /usr, dpkg-buildflags) in $build"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
    -DDOCKHAND_BUILD_TESTS=OFF -DDOCKHAND_BUILD_BENCH=OFF -DDOCKHAND_WERROR=OFF \
    -DCMAKE_C_FLAGS="$(dpkg-buildflags --get CPPFLAGS) $(dpkg-buildflags --get CFLAGS)" \
    -DCMAKE_CXX_FLAGS="$(dpkg-buildflags --get CPPFLAGS) $(dpkg-buildflags --get CXXFLAGS)" \
    -DCMAKE_EXE_LINKER_FLAGS="$(dpkg-buildflags --get LDFLAGS)" \
    -DCMAKE_MODULE_LINKER_FLAGS="$(dpkg-buildflags --get LDFLAGS)" \
    -DCMAKE_SHARED_LINKER_FLAGS="$(dpkg-buildflags --get LDFLAGS)" >/dev/null
  cmake --build "$build" -j"$jobs"
fi
rm -rf "$build/packages"
(cd "$build" && cpack >/dev/null)
deb="$(ls "$build"/packages/dockhand_*.deb)"
dev_deb="$(ls "$build"/packages/dockhand-dev_*.deb)"
[ -n "$deb" ] && [ -n "$dev_deb" ] || fail "cpack made no .deb"
ls -l "$build"/packages/

step "an upgrade package: the same one as a newer version, with another version string"
# What an upgrade installs, made from this build: the package's version raised, and the agent's
# version string changed in its program (the same length), so that the hosts test below can
# tell the new program from the old one once it runs in place.
upgrade_root="$work/upgrade-root"
rm -rf "$upgrade_root"
dpkg-deb -R "$deb" "$upgrade_root"
old_version="$(dpkg-deb -f "$deb" Version)"
upgrade_version="${old_version}+upgrade1"
sed -i "s/^Version: .*/Version: $upgrade_version/" "$upgrade_root/DEBIAN/control"
program_version="${old_version%-*}"
python3 - "$upgrade_root/usr/bin/dockhand" "$program_version" <<'PY'
import sys
path, version = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
old = version.encode() + b"\0"
new = bytes(b if not chr(b).isdigit() else ord("9") for b in old)
count = data.count(old)
if count == 0:
    sys.exit("no version string %s in %s" % (version, path))
open(path, "wb").write(data.replace(old, new))
print("upgrade program: %d version string(s) %s -> %s" % (count, version, new[:-1].decode()))
PY
(cd "$upgrade_root" && find usr -type f -exec md5sum {} + > DEBIAN/md5sums)
upgrade_deb="$work/dockhand_${upgrade_version}_upgrade.deb"
dpkg-deb --root-owner-group -b "$upgrade_root" "$upgrade_deb" >/dev/null
export DOCKHAND_UPGRADE_DEB="$upgrade_deb"
export DOCKHAND_UPGRADE_PROGRAM_VERSION="${program_version//[0-9]/9}"
# And the rpm, for the hosts test's upgrade as an rpm system makes it (its %post, $1 = 2).
if ls "$build"/packages/dockhand-[0-9]*.rpm >/dev/null 2>&1; then
  export DOCKHAND_UPGRADE_RPM
  DOCKHAND_UPGRADE_RPM="$(realpath "$build"/packages/dockhand-[0-9]*.rpm)"
fi
ls -l "$upgrade_deb"

step "package contents"
dpkg-deb --info "$deb" | sed -n '/Package:/,$p'
dpkg-deb --contents "$deb"
dpkg-deb --contents "$dev_deb"
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | grep -x /etc/dockhand/agent.json >/dev/null \
  || fail "/etc/dockhand/agent.json is not a conffile"
if ls "$build"/packages/*.rpm >/dev/null 2>&1; then
  for r in "$build"/packages/*.rpm; do
    rpm -qp --qf '%{NAME} %{VERSION}-%{RELEASE} %{ARCH} %{LICENSE}\n' "$r"
  done
  rpm -qp --configfiles "$build"/packages/dockhand-[0-9]*.rpm | grep -x /etc/dockhand/agent.json >/dev/null \
    || fail "the rpm does not mark /etc/dockhand/agent.json as %config"
fi

step "the image recipe and the Kubernetes manifests name only what this package installs"
version="$(dpkg-deb -f "$deb" Version)"
python3 tests/kubernetes/container_refs_test.py --source-dir "$src" --build-dir "$build" \
  --version "${version%-*}" --deb "$deb"

step "lintian"
# Errors and warnings both fail; the justified exceptions are in
# packaging/debian/dockhand.lintian-overrides (installed with the package).
lintian --fail-on error,warning --no-tag-display-limit "$deb" "$dev_deb"

step "install with dpkg"
dpkg -i "$deb" "$dev_deb" || { apt-get install -f -y -qq; dpkg -i "$deb" "$dev_deb"; }
getent passwd dockhand >/dev/null || fail "no dockhand user after install"
for f in plugins.md jobs.md blocks.md resources.md protocol.md; do
  [ -f "/usr/share/doc/dockhand-dev/$f" ] || fail "dockhand-dev lacks /usr/share/doc/dockhand-dev/$f"
done
[ "$(stat -c '%U:%G %a' /var/lib/dockhand)" = "dockhand:dockhand 711" ] \
  || fail "/var/lib/dockhand is $(stat -c '%U:%G %a' /var/lib/dockhand), expected dockhand:dockhand 711"

step "Kubernetes manifests and scripts, the image's entrypoint"
for f in decommission.sh nvidia-visible-devices.sh; do
  [ -x "/usr/share/dockhand/kubernetes/$f" ] || fail "/usr/share/dockhand/kubernetes/$f is not installed executable"
done
[ -x /usr/share/dockhand/container/entrypoint.sh ] || fail "the image's entrypoint is not installed executable"
[ -f /usr/share/dockhand/container/Containerfile ] || fail "the Containerfile is not installed"
ls /usr/share/dockhand/kubernetes/*.yaml

step "systemd-analyze verify"
cp /lib/systemd/system/dockhand@.service "$work/dockhand@ci.service" 2>/dev/null \
  || cp /usr/lib/systemd/system/dockhand@.service "$work/dockhand@ci.service"
unit_dir="$(dirname "$(dpkg -L dockhand | grep '/dockhand.service$')")"
systemd-analyze verify "$unit_dir/dockhand.service" "$work/dockhand@ci.service"

step "installed programs"
dockhand --version
dockhand-driver --version
man -w dockhand >/dev/null && man -w dockhand-driver >/dev/null || fail "man pages not found"
dockhand config validate /etc/dockhand/agent.json
dockhand plugins list
# Each installed plugin the shipped config names, its hooks called once (a task launched and
# killed, a block migrated to a scratch peer and read back).
dockhand plugins check --config /etc/dockhand/agent.json || fail "dockhand plugins check failed"

step "signed plugins: the package's catalog pins its own plugins as installed"
catalog=/usr/share/dockhand/plugins.sha256
[ -s "$catalog" ] || fail "the package ships no $catalog"
grep -v '^#' "$catalog" | sha256sum --check --strict || fail "$catalog does not match the installed plugins"
[ "$(grep -vc '^#' "$catalog")" -eq "$(ls /usr/lib/dockhand/plugins/*.so | wc -l)" ] \
  || fail "$catalog does not list every installed plugin"
# The strict policy is one line: the shipped plugins load under it with no more setup.
echo '{"plugin_trust": {"policy": "verified"}}' > "$work/verified.json"
dockhand plugins check --config /etc/dockhand/agent.json --config "$work/verified.json" \
  || fail "the shipped plugins do not load under plugin_trust verified"

step "the TLS module"
# OpenSSL is in /usr/lib/dockhand/libdockhand-tls.so, loaded only with TLS on. The installed agent
# must find it: with certificate files that do not exist, the error must come from the module's
# checks of those files, not from the loading of the module.
[ -f /usr/lib/dockhand/libdockhand-tls.so ] || fail "/usr/lib/dockhand/libdockhand-tls.so is not installed"
if ldd /usr/lib/dockhand/libdockhand-tls.so | grep "not found" >/dev/null; then
  ldd /usr/lib/dockhand/libdockhand-tls.so
  fail "the TLS module needs a library the package does not depend on"
fi
cat > "$work/tls-agent.json" <<JSON
{"tls": {"certificate_file": "$work/no-such.crt", "private_key_file": "$work/no-such.key",
         "ca_file": "$work/no-such-ca.crt"}}
JSON
set +e
tls_out="$(dockhand --config "$work/tls-agent.json" --driver-url wss://127.0.0.1:1/ --executor-id tls-check \
  --app-id ci --cores 1 --work-dir "$work/tls-work" 2>&1)"
tls_rc=$?
set -e
echo "$tls_out" | tail -n 3
[ "$tls_rc" = 2 ] || fail "the agent with an unusable tls section exited $tls_rc, expected 2 (config error)"
echo "$tls_out" | grep "tls.certificate_file $work/no-such.crt: cannot open" >/dev/null \
  || fail "the installed agent did not load its TLS module"

step "monitoring files"
# The Grafana dashboard parses; the example scrape config is one Prometheus accepts.
python3 -m json.tool /usr/share/dockhand/grafana/dockhand.json >/dev/null \
  || fail "/usr/share/dockhand/grafana/dockhand.json is missing or not JSON"
[ -f /usr/share/dockhand/prometheus/dockhand.yml ] \
  || fail "/usr/share/dockhand/prometheus/dockhand.yml is missing"
if command -v promtool >/dev/null; then
  promtool check config /usr/share/dockhand/prometheus/dockhand.yml
fi
if ls "$build"/packages/dockhand-[0-9]*.rpm >/dev/null 2>&1; then
  for f in /usr/share/dockhand/grafana/dockhand.json /usr/share/dockhand/prometheus/dockhand.yml; do
    rpm -qlp "$build"/packages/dockhand-[0-9]*.rpm | grep -x "$f" >/dev/null || fail "the rpm lacks $f"
  done
fi

step "a real job: installed driver, installed agent started as the unit starts it"
# The agent runs as the dockhand user with the unit's command line and a notify socket that
# stands in for systemd's; the driver waits for it, runs wordcount, then stops it.
jobdir=/usr/share/doc/dockhand/examples/wordcount
notify="$work/notify.sock"
cat > "$work/notify.py" <<'PY'
import os, socket, sys
path, log = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
os.chmod(path, 0o777)
s.settimeout(120)
with open(log, "w") as out:
    while True:
        try:
            msg = s.recv(4096).decode()
        except socket.timeout:
            break
        out.write(msg + "\n")
        out.flush()
        if "STOPPING=1" in msg:
            break
PY
python3 "$work/notify.py" "$notify" "$work/notify.log" &
bg_pids="$!"
for _ in $(seq 100); do [ -S "$notify" ] && break; sleep 0.1; done
dockhand-driver run "$jobdir/job.json" --local-agents 0 --min-agents 1 --listen 127.0.0.1:0 \
  --port-file "$work/port" --timeout 120 > "$work/job.out" 2>&1 &
driver_pid=$!
bg_pids="$bg_pids $driver_pid"
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
[ -s "$work/port" ] || fail "the driver did not write its port"
agent_rc=0
runuser -u dockhand -- env NOTIFY_SOCKET="$notify" JOURNAL_STREAM= \
  DOCKHAND_DRIVER_URL="ws://127.0.0.1:$(cat "$work/port")/" DOCKHAND_APP_ID=package-check \
  /usr/bin/dockhand --config /etc/dockhand/agent.json > "$work/agent.log" 2>&1 || agent_rc=$?
driver_rc=0
wait "$driver_pid" || driver_rc=$?
cat "$work/job.out"
if [ "$driver_rc" -ne 0 ] || [ "$agent_rc" -ne 0 ]; then
  cat "$work/agent.log"
  fail "job: driver exited $driver_rc, agent exited $agent_rc"
fi
grep -q "sum=406" "$work/job.out" || fail "wordcount did not sum to 406"
wait 2>/dev/null || true
grep -qx "READY=1" "$work/notify.log" || fail "the agent did not send READY=1: $(cat "$work/notify.log")"
grep -qx "STOPPING=1" "$work/notify.log" || fail "the agent did not send STOPPING=1"
echo "sd_notify: $(tr '\n' ' ' < "$work/notify.log")"

step "a real job: the installed driver starting installed agents"
dockhand-driver run "$jobdir/job.json" --local-agents 1 --timeout 120 --quiet

step "systemd on many hosts: the installed unit on three namespaced hosts, one driver"
# Each host boots its own systemd (tests/packaging/systemd_hosts_test.sh, ~30 s); exit 77 is
# a machine that cannot make namespaces, said as such.
hosts_rc=0
tests/packaging/systemd_hosts_test.sh || hosts_rc=$?
if [ "$hosts_rc" -eq 77 ]; then
  echo "(systemd on many hosts: skipped, see the reason above)"
elif [ "$hosts_rc" -ne 0 ]; then
  fail "systemd on many hosts failed (exit $hosts_rc)"
fi

step "an SDK example built out of tree against dockhand-dev"
if [ -d sdk/examples ] && ls sdk/examples/*/CMakeLists.txt >/dev/null 2>&1; then
  for example in sdk/examples/*/; do
    name="$(basename "$example")"
    cp -r "$example" "$work/example-$name"
    cmake -S "$work/example-$name" -B "$work/example-$name/build" -G Ninja >/dev/null
    cmake --build "$work/example-$name/build"
    ls "$work/example-$name/build"/*.so >/dev/null 2>&1 \
      || find "$work/example-$name/build" -name '*.so' | grep . >/dev/null \
      || fail "SDK example $name built no plugin"
    echo "built SDK example $name"
  done
else
  echo "(no sdk/examples in this version: skipped)"
fi

step "a job library built out of tree against dockhand-dev, run by the installed agent"
if [ -d "$work/example-word-job" ]; then
  lib="$work/example-word-job/build/libword-job.so"
  [ -f "$lib" ] || fail "dockhand_add_job_library(word-job) did not build libword-job.so"
  # Default visibility: the task function is in the dynamic symbol table (thread dumps name it).
  # (The symbol list is read whole first: grep -q stops reading at the first match, and under
  # pipefail nm's SIGPIPE would fail the check.)
  symbols=$(nm -D --defined-only -C "$lib")
  grep -q 'word_job::count' <<<"$symbols" \
    || fail "libword-job.so does not export word_job::count: $symbols"
  grep -qw dh_job_entry <<<"$symbols" || fail "libword-job.so has no dh_job_entry"
  if [ -e /usr/lib/dockhand/plugins/dockhand-library.so ]; then
    data=/usr/share/doc/dockhand/examples/wordcount/data
    python3 - "$lib" "$data" "$work" <<'PY'
import json, sys
lib, data, work = sys.argv[1:4]
json.dump({"plugins": [{"name": "process"},
                       {"name": "library", "config": {"libraries": {"words": lib}}}]},
          open(work + "/agent-library.json", "w"), indent=2)
tasks = [{"name": "part-%d" % i, "library": "words", "function": "count",
          "args": "%s/part-%d.txt" % (data, i)} for i in range(1, 5)]
json.dump({"name": "word-job", "aggregate": "sum", "tasks": tasks},
          open(work + "/word-job.json", "w"), indent=2)
# The same library named by its path instead of a name of the runner's "libraries".
json.dump({"name": "word-job-path",
           "tasks": [{"name": "by-path", "library": lib, "function": "count",
                      "args": data + "/part-1.txt"}]},
          open(work + "/word-job-path.json", "w"), indent=2)
PY
    dockhand-driver run "$work/word-job.json" --local-agents 1 --timeout 120 \
      --agent-config "$work/agent-library.json" > "$work/word-job.out" 2>&1 \
      || { cat "$work/word-job.out"; fail "the job library's job failed"; }
    cat "$work/word-job.out"
    grep -q "sum=406" "$work/word-job.out" || fail "the job library's word count did not sum to 406"
    dockhand-driver run "$work/word-job-path.json" --local-agents 1 --timeout 120 --quiet \
      --agent-config "$work/agent-library.json" || fail "a library named by its path did not run"
  else
    echo "(no library runner in this version: the job library was built, not run)"
  fi
else
  echo "(no sdk/examples/word-job in this version: skipped)"
fi

step "dockhand plugins new: each kind's project built and tested against dockhand-dev"
if [ -d /usr/share/dockhand/sdk-templates ]; then
  for kind in discovery runner migration job; do
    dockhand plugins new --kind "$kind" "pc-$kind" --dir "$work/new-$kind" >/dev/null \
      || fail "dockhand plugins new --kind $kind failed"
    cmake -S "$work/new-$kind" -B "$work/new-$kind/build" -G Ninja >/dev/null
    cmake --build "$work/new-$kind/build" >/dev/null || fail "the new $kind project does not build"
    ctest --test-dir "$work/new-$kind/build" --output-on-failure --no-tests=error \
      || fail "the new $kind project's tests failed"
    echo "made, built and tested a new $kind project"
  done
else
  echo "(no project templates in this version: skipped)"
fi

step "purge"
dpkg -L dockhand dockhand-dev | sort -u > "$work/files"
dpkg --purge dockhand-dev dockhand
left=()
for path in /etc/dockhand /var/lib/dockhand; do [ -e "$path" ] && left+=("$path"); done
getent passwd dockhand >/dev/null && left+=("user dockhand")
getent group dockhand >/dev/null && left+=("group dockhand")
while read -r f; do
  [ -e "$f" ] || continue
  # Directories every system has (/usr/bin, /usr/share/man/man8, ...) stay; ours may not.
  if [ ! -d "$f" ] || [[ "$f" == *dockhand* ]]; then
    left+=("$f")
  fi
done < "$work/files"
[ ${#left[@]} -eq 0 ] || fail "left after purge: ${left[*]}"

step "OK"
