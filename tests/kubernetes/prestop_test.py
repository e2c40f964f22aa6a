#!/usr/bin/env python3
"""CTest kubernetes_prestop_decommission: the agent pod's pieces, run for real on 127.0.0.1.

The agent is started as the pod starts it: through the image's entrypoint
(packaging/container/entrypoint.sh: the secret copied to a private file, the pid file), with the
ConfigMap's agent.json (packaging/kubernetes/config.yaml) and the DOCKHAND_* variables the
StatefulSet sets. The driver runs with the ConfigMap's driver.json and the same secret. Then
packaging/kubernetes/decommission.sh, the preStop hook, is run against the agent:

1. while a task runs: /readyz turns 503, the task finishes (the job succeeds), the agent exits 0
   and the script exits 0 once it has;
2. with a task that outlasts --wait: the script gives up after --wait seconds with exit 1 and
   leaves the agent (not ready, still decommissioning) to the container's stop;
3. a pid file whose process is gone: exit 0, nothing signalled; a pid that is not the agent:
   exit 2, nothing signalled;
4. the manifests' own command lines: the driver with driver.yaml's args (`serve`), the agent
   with agents.yaml's args and variables (executor id and cores as the pod gives them), both
   probes, and the preStop command as agents.yaml has it.

It also checks that `dockhand config validate` accepts the ConfigMaps' agent configs with the
pod's variables. Every wait is bounded; only the processes started here are signalled, by pid.
Usage: prestop_test.py --bin-dir BUILD/bin --source-dir SRC
"""
import argparse
import json
import os
import signal
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

try:
    import yaml
except ImportError:  # Debian: python3-yaml (scripts/setup installs it)
    print("SKIP kubernetes_prestop_decommission: no python3-yaml")
    sys.exit(77)

started = []  # every process started here, stopped at the end by pid


def fail(message):
    print(f"FAIL: {message}", flush=True)
    raise SystemExit(1)


def step(message):
    print(f"== {message}", flush=True)


def wait_for(what, predicate, timeout, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    fail(f"{what}: not within {timeout} s")


def block_port_of(agent, log_path):
    """The port the agent's block server bound (its config asks for port 0), from its log."""
    def port():
        if agent.poll() is not None:
            fail(f"the agent exited {agent.returncode}:\n{log_tail(log_path)}")
        try:
            with open(log_path, errors="replace") as f:
                m = re.search(r"block server listening on 127\.0\.0\.1:(\d+)", f.read())
        except OSError:
            return None
        return int(m.group(1)) if m else None
    return wait_for("the agent's block server port in its log", port, 60)


def http_get(url):
    """(status, body) or (None, why) when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, OSError) as e:
        return None, str(e)


def configmaps(source_dir):
    out = {}
    for name in ("config.yaml", "agents-gpu.yaml"):
        with open(os.path.join(source_dir, "packaging/kubernetes", name)) as f:
            for doc in yaml.safe_load_all(f):
                if doc and doc.get("kind") == "ConfigMap":
                    out.update(doc["data"])
    return out


def write(path, text, mode=0o644):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def log_tail(path, lines=40):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"


class Cluster:
    """One driver (`run` of a job) and one agent started as the pod starts it."""

    def __init__(self, args, work, name, task_shell):
        self.args, self.work, self.name = args, work, name
        self.dir = os.path.join(work, name)
        os.makedirs(os.path.join(self.dir, "work"))
        job = {"name": f"prestop-{name}", "max_attempts": 1,
               "tasks": [{"name": "slow", "shell": task_shell}]}
        job_file = write(os.path.join(self.dir, "job.json"), json.dumps(job))
        port_file = os.path.join(self.dir, "driver.port")
        self.driver_out = os.path.join(self.dir, "driver.out")
        self.driver = subprocess.Popen(
            [os.path.join(args.bin_dir, "dockhand-driver"), "run", job_file,
             "--local-agents", "0", "--min-agents", "1", "--listen", "127.0.0.1:0",
             "--port-file", port_file, "--config", os.path.join(work, "cluster/driver.json"),
             "--auth-secret-file", os.path.join(work, "driver.secret"), "--timeout", "120"],
            stdout=open(self.driver_out, "w"), stderr=subprocess.STDOUT)
        started.append(self.driver)
        wait_for("the driver's port file", lambda: os.path.exists(port_file), 30)
        with open(port_file) as f:
            driver_port = int(f.read().strip())

        override = write(os.path.join(self.dir, "override.json"), json.dumps({
            "work_dir": os.path.join(self.dir, "work"), "bind_address": "127.0.0.1",
            "block_port": 0}))
        self.run_dir = os.path.join(self.dir, "run")
        env = dict(os.environ)
        env.update({
            "DOCKHAND_RUN_DIR": self.run_dir,
            "DOCKHAND_SECRET_SOURCE": os.path.join(work, "secret-volume/cluster.secret"),
            "DOCKHAND_DRIVER_URL": f"ws://127.0.0.1:{driver_port}/",
            "DOCKHAND_EXECUTOR_ID": f"dockhand-agent-{name}",
            "DOCKHAND_CORES": "1",
        })
        self.agent_log = os.path.join(self.dir, "agent.log")
        self.agent = subprocess.Popen(
            ["sh", os.path.join(args.source_dir, "packaging/container/entrypoint.sh"),
             os.path.join(args.bin_dir, "dockhand"),
             "--config", os.path.join(work, "cluster/agent.json"), "--config", override,
             "--hostname", "127.0.0.1"],
            env=env, stdout=open(self.agent_log, "w"), stderr=subprocess.STDOUT)
        started.append(self.agent)
        self.block_port = block_port_of(self.agent, self.agent_log)

    def url(self, path):
        return f"http://127.0.0.1:{self.block_port}{path}"

    def wait_running_task(self):
        def ready():
            if self.agent.poll() is not None:
                fail(f"the agent exited {self.agent.returncode}:\n{log_tail(self.agent_log)}")
            return http_get(self.url("/readyz"))[0] == 200
        wait_for("the agent's /readyz to answer 200", ready, 60)

        def running():
            code, body = http_get(self.url("/v1/status"))
            return code == 200 and json.loads(body).get("running_tasks", 0) >= 1
        wait_for("the task to run on the agent", running, 60)

    def decommission(self, *extra):
        return subprocess.Popen(
            [os.path.join(self.args.source_dir, "packaging/kubernetes/decommission.sh"),
             "--pid-file", os.path.join(self.run_dir, "dockhand.pid"), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def check_configs(args, work, maps):
    step("dockhand config validate accepts the ConfigMaps' agent configs with the pod's variables")
    os.makedirs(os.path.join(work, "cluster"))
    agent_json = write(os.path.join(work, "cluster/agent.json"), maps["agent.json"])
    write(os.path.join(work, "cluster/driver.json"), maps["driver.json"])
    gpu_json = write(os.path.join(work, "cluster/agent-gpu.json"), maps["agent-gpu.json"])
    env = dict(os.environ, DOCKHAND_DRIVER_URL="ws://dockhand-driver:7077/",
               DOCKHAND_EXECUTOR_ID="dockhand-agent-0", DOCKHAND_CORES="2")
    for files in ([agent_json], [agent_json, gpu_json]):
        result = subprocess.run([os.path.join(args.bin_dir, "dockhand"), "config", "validate",
                                 *files], env=env, capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            fail(f"config validate {files}: exit {result.returncode}\n{result.stdout}{result.stderr}")
        print(f"valid: {' + '.join(os.path.basename(f) for f in files)}")


def scenario_finishes(args, work):
    step("decommission while a task runs: not ready, the task finishes, the agent exits 0")
    cluster = Cluster(args, work, "finish", "sleep 3; echo slept")
    cluster.wait_running_task()
    with open(os.path.join(cluster.run_dir, "dockhand.pid")) as f:
        if int(f.read()) != cluster.agent.pid:
            fail("the entrypoint's pid file does not hold the agent's pid")
    secret = os.path.join(cluster.run_dir, "cluster.secret")
    if os.stat(secret).st_mode & 0o777 != 0o600:
        fail(f"the entrypoint's secret copy has mode {os.stat(secret).st_mode & 0o777:o}")

    hook = cluster.decommission("--wait", "90")
    not_ready = wait_for("/readyz to turn not ready",
                         lambda: (lambda r: r if r[0] == 503 else None)(
                             http_get(cluster.url("/readyz"))), 30)
    print(f"/readyz while decommissioning: {not_ready[0]} {not_ready[1].strip()}")
    try:
        out, _ = hook.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        fail("decommission.sh did not return within 120 s")
    print(out.strip())
    if hook.returncode != 0:
        fail(f"decommission.sh exited {hook.returncode}")
    if cluster.agent.poll() is None:
        fail("decommission.sh returned 0 while the agent still runs")
    if cluster.agent.returncode != 0:
        fail(f"the agent exited {cluster.agent.returncode}, not 0:\n{log_tail(cluster.agent_log)}")
    if "sending SIGPWR" not in out or "exited after" not in out:
        fail("decommission.sh did not say what it did")
    try:
        cluster.driver.wait(timeout=60)
    except subprocess.TimeoutExpired:
        fail("the driver did not end the job")
    with open(cluster.driver_out) as f:
        report = f.read()
    if cluster.driver.returncode != 0 or "SUCCEEDED" not in report or "slept" not in report:
        fail(f"the job did not succeed with the task's output (exit {cluster.driver.returncode}):\n"
             f"{report}\n{log_tail(cluster.agent_log)}")
    print(report.strip().splitlines()[-1])


def scenario_wait_bound(args, work):
    step("a task that outlasts --wait: the script gives up with exit 1, the agent stays")
    cluster = Cluster(args, work, "bound", "sleep 60")
    cluster.wait_running_task()
    hook = cluster.decommission("--wait", "1")
    try:
        out, _ = hook.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        fail("decommission.sh --wait 1 did not return within 30 s")
    print(out.strip())
    if hook.returncode != 1 or "still runs after 1s" not in out:
        fail(f"decommission.sh --wait 1 exited {hook.returncode}, expected 1")
    if cluster.agent.poll() is not None:
        fail(f"the agent exited ({cluster.agent.returncode}) while its task still ran")
    code, body = http_get(cluster.url("/readyz"))
    if code != 503:
        fail(f"/readyz answered {code} {body!r} during the decommission")
    # What Kubernetes does next: SIGTERM (the agent stops at once).
    cluster.agent.send_signal(signal.SIGTERM)
    try:
        cluster.agent.wait(timeout=60)
    except subprocess.TimeoutExpired:
        fail("the agent did not stop on SIGTERM within 60 s")
    print(f"after SIGTERM the agent exited {cluster.agent.returncode}")
    cluster.driver.send_signal(signal.SIGTERM)
    cluster.driver.wait(timeout=60)


def scenario_no_agent(args, work):
    step("no agent behind the pid file: nothing signalled")
    script = os.path.join(args.source_dir, "packaging/kubernetes/decommission.sh")
    gone = subprocess.Popen(["true"])
    gone.wait()
    pid_file = write(os.path.join(work, "gone.pid"), f"{gone.pid}\n")
    result = subprocess.run([script, "--pid-file", pid_file, "--wait", "5"],
                            capture_output=True, text=True, timeout=30)
    print(result.stderr.strip())
    if result.returncode != 0 or "not running" not in result.stderr:
        fail(f"a pid file of an exited process: exit {result.returncode}, expected 0")
    sleeper = subprocess.Popen(["sleep", "30"])
    started.append(sleeper)
    result = subprocess.run([script, "--pid", str(sleeper.pid), "--wait", "5"],
                            capture_output=True, text=True, timeout=30)
    print(result.stderr.strip())
    if result.returncode != 2 or "not the agent" not in result.stderr or sleeper.poll() is not None:
        fail(f"a pid that is not the agent: exit {result.returncode}, expected 2, not signalled")
    result = subprocess.run([script, "--wait", "soon"], capture_output=True, text=True, timeout=30)
    if result.returncode != 2:
        fail(f"--wait soon: exit {result.returncode}, expected 2")


def manifest_container(source_dir, file_name, kind):
    with open(os.path.join(source_dir, "packaging/kubernetes", file_name)) as f:
        for doc in yaml.safe_load_all(f):
            if doc and doc.get("kind") == kind:
                return doc["spec"]["template"]["spec"]["containers"][0]
    fail(f"no {kind} in {file_name}")


def scenario_manifests(args, work):
    step("the manifests' own command lines: driver.yaml's serve, agents.yaml's agent and preStop")
    here = os.path.join(work, "manifests")
    os.makedirs(os.path.join(here, "work"))
    run_dir = os.path.join(here, "run")
    # Where the pod's mounts and image files are on this machine.
    paths = {"/etc/dockhand/cluster": os.path.join(work, "cluster"),
             "/etc/dockhand/secret": os.path.join(work, "secret-volume"),
             "/run/dockhand": run_dir,
             "/usr/share/dockhand/kubernetes": os.path.join(args.source_dir, "packaging/kubernetes")}
    programs = {"dockhand": os.path.join(args.bin_dir, "dockhand"),
                "dockhand-driver": os.path.join(args.bin_dir, "dockhand-driver")}

    def local(word):
        if word in programs:
            return programs[word]
        for pod_path, path in paths.items():
            if word == pod_path or word.startswith(pod_path + "/"):
                return path + word[len(pod_path):]
        return word

    def pod_env(container, values):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        for key in ("ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS"):
            if key in os.environ:
                env[key] = os.environ[key]
        for e in container.get("env", []):
            if "value" in e:
                env[e["name"]] = local(e["value"])
            else:
                source = e["valueFrom"]
                ref = (source.get("fieldRef", {}).get("fieldPath")
                       or source["resourceFieldRef"]["resource"])
                env[e["name"]] = values[ref]
        return env

    # The driver as driver.yaml runs it, on a free loopback port instead of 0.0.0.0:7077.
    driver_spec = manifest_container(args.source_dir, "driver.yaml", "Deployment")
    port_file = os.path.join(here, "driver.port")
    driver_args = [local(w) for w in driver_spec["args"]]
    driver_args[driver_args.index("0.0.0.0:7077")] = "127.0.0.1:0"
    driver_out = os.path.join(here, "driver.out")
    driver = subprocess.Popen(
        ["sh", os.path.join(args.source_dir, "packaging/container/entrypoint.sh"), *driver_args,
         "--port-file", port_file],
        env=pod_env(driver_spec, {}), stdout=open(driver_out, "w"), stderr=subprocess.STDOUT)
    started.append(driver)

    def driver_up():
        if driver.poll() is not None:
            fail(f"the driver (driver.yaml's command line) exited {driver.returncode}:\n"
                 f"{log_tail(driver_out)}")
        return os.path.exists(port_file)
    wait_for("the driver's port file", driver_up, 30)
    with open(port_file) as f:
        driver_port = int(f.read().strip())

    # The agent as agents.yaml runs it; this machine's work dir and a free block port on top.
    agent_spec = manifest_container(args.source_dir, "agents.yaml", "StatefulSet")
    override = write(os.path.join(here, "override.json"), json.dumps({
        "work_dir": os.path.join(here, "work"), "bind_address": "127.0.0.1", "block_port": 0}))
    cpu = agent_spec["resources"]["limits"]["cpu"]
    cores = -(-int(cpu[:-1]) // 1000) if cpu.endswith("m") else int(cpu)
    env = pod_env(agent_spec, {"metadata.name": "dockhand-agent-0", "status.podIP": "127.0.0.1",
                               "limits.cpu": str(cores)})
    env["DOCKHAND_DRIVER_URL"] = f"ws://127.0.0.1:{driver_port}/"
    agent_args = [local(w).replace("$(POD_IP)", env["POD_IP"]) for w in agent_spec["args"]]
    agent_log = os.path.join(here, "agent.log")
    agent = subprocess.Popen(
        ["sh", os.path.join(args.source_dir, "packaging/container/entrypoint.sh"), *agent_args,
         "--config", override],
        env=env, stdout=open(agent_log, "w"), stderr=subprocess.STDOUT)
    started.append(agent)
    block_port = block_port_of(agent, agent_log)

    def ready():
        if agent.poll() is not None:
            fail(f"the agent (agents.yaml's command line) exited {agent.returncode}:\n"
                 f"{log_tail(agent_log)}")
        return http_get(f"http://127.0.0.1:{block_port}/readyz")[0] == 200
    wait_for("the agent's /readyz (agents.yaml's readinessProbe) to answer 200", ready, 60)
    code, body = http_get(f"http://127.0.0.1:{block_port}/healthz")
    if code != 200:
        fail(f"/healthz (agents.yaml's livenessProbe) answered {code} {body!r}")
    code, body = http_get(f"http://127.0.0.1:{block_port}/v1/status")
    status = json.loads(body)
    total = status.get("cores", {}).get("total")
    print(f"registered as {status.get('executor_id')} with {total} core(s)")
    if status.get("executor_id") != "dockhand-agent-0" or total != cores:
        fail(f"the agent's status does not show the pod's name and CPU limit: {body}")

    # The preStop hook exactly as agents.yaml gives it, its --log going to a file here.
    hook_log = os.path.join(here, "container.log")
    command = [local(w) for w in agent_spec["lifecycle"]["preStop"]["exec"]["command"]]
    command[command.index("/proc/1/fd/1")] = hook_log
    hook = subprocess.run(command, capture_output=True, text=True, timeout=300)
    print(hook.stderr.strip())
    if hook.returncode != 0:
        fail(f"the preStop command exited {hook.returncode}")
    try:
        agent.wait(timeout=10)
    except subprocess.TimeoutExpired:
        fail("the preStop command returned while the agent still runs")
    if agent.returncode != 0:
        fail(f"the agent exited {agent.returncode}, not 0:\n{log_tail(agent_log)}")
    with open(hook_log) as f:
        if "exited after" not in f.read():
            fail("the preStop command's --log file does not have its lines")
    driver.send_signal(signal.SIGTERM)
    try:
        driver.wait(timeout=60)
    except subprocess.TimeoutExpired:
        fail("the driver did not stop on SIGTERM")
    if driver.returncode != 0:
        fail(f"the driver exited {driver.returncode} on SIGTERM:\n{log_tail(driver_out)}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--source-dir", required=True)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="dockhand-prestop-")
    keep = False
    try:
        maps = configmaps(args.source_dir)
        check_configs(args, work, maps)
        # The Secret volume's file: readable by the pod's group, as a Secret with fsGroup is.
        os.makedirs(os.path.join(work, "secret-volume"))
        secret = os.urandom(32).hex()
        write(os.path.join(work, "secret-volume/cluster.secret"), secret, 0o640)
        write(os.path.join(work, "driver.secret"), secret, 0o600)
        scenario_finishes(args, work)
        scenario_wait_bound(args, work)
        scenario_no_agent(args, work)
        scenario_manifests(args, work)
        print("OK")
    except SystemExit:
        keep = True
        print(f"(work dir kept: {work})")
        raise
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait()
        if not keep:
            subprocess.run(["rm", "-rf", work], check=False)


if __name__ == "__main__":
    main()
