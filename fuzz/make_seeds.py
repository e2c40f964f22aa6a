#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (fuzz/corpus/<target>/) from the tests' inputs.

Every JSON value the tests feed a decoder (raw string literals R"(...)" in the test sources,
and the config files under tests/configs, configs/ and examples/) becomes a seed of the targets
that decode that kind of input. Run it again after adding tests; libFuzzer's -merge=1 can then
drop seeds that add no coverage. File names are content hashes, so reruns add no duplicates.
"""
import hashlib
import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
# The tests that feed protocol frames and bodies.
FRAME_TESTS = ("tests/protocol/*.cpp", "tests/agent/core/*.cpp", "tests/agent/blocks/*.cpp",
               "tests/agent/decommission/*.cpp", "tests/agent/rpc/*.cpp", "tests/driver/*.cpp",
               "tests/integration/**/*.cpp")
# The tests of resource discovery: the agent's chain, and the discovery plugins.
DISCOVERY_TESTS = ("tests/agent/resources/*.cpp", "tests/plugins/*.cpp",
                   "tests/plugins/script/*.cpp")
RAW = re.compile(r'R"\((.*?)\)"', re.S)

# The keys each body decoder reads: a test body goes to every decoder it shares a key with.
BODY_KEYS = {
    "Hello": {"protocol_version", "role", "software", "auth"},
    "Authenticate": {"proof"},
    "RetrieveAppConfig": {"resource_profile_id"},
    "RegisterExecutor": {"executor_id", "hostname", "cores", "log_urls", "attributes",
                         "resources", "block_url", "waits_for_cores", "resumes"},
    "LaunchedExecutor": {"executor_id"},
    "LaunchTask": {"task"},
    "KillTask": {"task_id", "interrupt", "reason"},
    "StatusUpdate": {"state", "result", "exit_code", "signal", "stderr_tail"},
    "StopExecutor": set(),
    "Shutdown": set(),
    "UpdateDelegationTokens": {"tokens"},
    "UpdateExecutorLogLevel": {"level"},
    "DecommissionExecutor": {"reason"},
    "ExecutorDecommissioning": {"executor_id"},
    "TaskThreadDump": {"task_id"},
    "RemoveExecutor": {"executor_id", "reason"},
    "Heartbeat": {"running_tasks", "sent_at_ms", "decommission"},
    "GetPeers": {"executor_id"},
    "UpdateBlockInfo": {"added", "removed"},
    "ResumeExecutor": {"executor_id", "running", "blocks"},
    "AppConfig": {"properties", "log_level", "resource_profile", "delegation_tokens"},
    "ResourceProfile": {"executor_resources", "task_resources"},
    "BlockInfo": {"id", "size", "checksum", "url"},
    "ResumeAccepted": {"tasks"},
    "Peers": {"peers"},
}


def literals(*globs):
    for pattern in globs:
        for path in sorted(ROOT.glob(pattern)):
            for text in RAW.findall(path.read_text()):
                yield text


def parsed(text):
    try:
        return json.loads(text)
    except ValueError:
        return None


def add(target, data):
    if isinstance(data, str):
        data = data.encode()
    if not data or len(data) > 4096:
        return
    out = CORPUS / target
    out.mkdir(parents=True, exist_ok=True)
    (out / hashlib.sha1(data).hexdigest()).write_bytes(data)


def main():
    bodies = []
    for text in literals(*FRAME_TESTS):
        value = parsed(text)
        if isinstance(value, dict) and "type" in value:
            add("envelope", text)
            if isinstance(value.get("type"), str) and isinstance(value.get("body"), dict):
                bodies.append((value["type"], json.dumps(value["body"])))
        elif isinstance(value, dict):
            for name, keys in BODY_KEYS.items():
                if keys & value.keys():
                    bodies.append((name, text))
            if isinstance(value.get("task"), dict):
                add("task_description", json.dumps(value["task"]))
    for name, body in bodies:
        if name in BODY_KEYS:
            add("message_body", f"{name}\n{body}")
        add("envelope", json.dumps({"type": name, "id": 1, "body": json.loads(body)}))
    for name in BODY_KEYS:
        add("message_body", f"{name}\n{{}}")

    configs = list(ROOT.glob("tests/configs/good/*.json")) + list(
        ROOT.glob("tests/configs/bad/*.json")) + [ROOT / "configs" / "agent.example.json",
                                                  ROOT / "configs" / "agent.json"]
    configs += ROOT.glob("examples/*/agent*.json")
    for path in sorted(configs):
        add("agent_config", path.read_bytes())
    for text in literals("tests/agent/app/*.cpp"):
        value = parsed(text)
        if isinstance(value, dict):
            add("agent_config", text)
        elif isinstance(value, list):
            add("resources_file", text)

    for text in literals(*DISCOVERY_TESTS):
        value = parsed(text)
        if isinstance(value, dict) and "name" in value:
            add("discovery_output", f"{value['name']}\n{text}")
    for text in literals(*DISCOVERY_TESTS):
        # The fake scripts' echo lines: what Spark's discovery scripts print.
        for line in re.findall(r"echo '(\{.*?\})'", text):
            value = parsed(line)
            if isinstance(value, dict) and isinstance(value.get("name"), str):
                add("discovery_output", f"{value['name']}\n{line}")

    ids = set()
    for path in sorted(ROOT.glob("tests/**/*.cpp")):
        ids.update(re.findall(r'"((?:shuffle|rdd|task)_[^"\\]*)"', path.read_text()))
    for block_id in sorted(ids):
        add("block_id", block_id)
        add("block_request", f"/blocks/{block_id}\nbytes=2-5\n20\nxxh64:0123456789abcdef")
    server_test = (ROOT / "tests/agent/blocks/block_server_test.cpp").read_text()
    ranges = sorted(set(re.findall(r'"(bytes=[^"]*)"', server_test)))
    for uri in ["/healthz", "/v1/status", "/blocks/shuffle_0_1_2?x=1", "/blocks/../etc", "/"]:
        for header in ranges:
            add("block_request", f"{uri}\n{header}\n20\n")
    # Log requests: the paths and queries of the log route's tests, with and without a Range.
    request_test = (ROOT / "tests/agent/blocks/block_request_test.cpp").read_text()
    log_uris = sorted(set(re.findall(r'"(/v1/(?:tasks|logs)/[^"]*)"', request_test)))
    queries = sorted(set(re.findall(r'parseLogWindow\("([^"]*)"', request_test)))
    for uri in log_uris:
        add("block_request", f"{uri}\n\n100\n")
    for query in queries:
        add("block_request", f"/v1/tasks/7/logs/stdout?{query}\n\n100\n")
        add("block_request", f"/v1/tasks/7/logs/stdout?{query}\nbytes=2-5\n100\n")


if __name__ == "__main__":
    main()
