#!/usr/bin/env python3
"""Checks that configs/agent.schema.json and `dockhand config validate` agree.

Good configs (configs/agent.json, configs/agent.example.json, tests/configs/good/*.json) must
pass both; each of tests/configs/bad/*.json must fail both, and `dockhand config validate`
must name the file in every problem it prints. Exits 77 (skipped) without python3-jsonschema.
"""
import argparse
import glob
import json
import os
import subprocess
import sys

try:
    import jsonschema
except ImportError:
    print("python3-jsonschema is not installed: skipped")
    sys.exit(77)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dockhand", required=True)
    parser.add_argument("--source-dir", required=True)
    args = parser.parse_args()
    src = args.source_dir
    with open(os.path.join(src, "configs", "agent.schema.json")) as f:
        schema = json.load(f)
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    validator = validator_class(schema)

    good = [os.path.join(src, "configs", "agent.json"),
            os.path.join(src, "configs", "agent.example.json")]
    good += sorted(glob.glob(os.path.join(src, "tests", "configs", "good", "*.json")))
    bad = sorted(glob.glob(os.path.join(src, "tests", "configs", "bad", "*.json")))
    if len(bad) < 5:
        print(f"expected the bad configs in tests/configs/bad, found {len(bad)}")
        return 1

    # The agent's verdict must not depend on the caller's DOCKHAND_* variables.
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKHAND_")}
    failures = []
    for path, expect_valid in [(p, True) for p in good] + [(p, False) for p in bad]:
        with open(path) as f:
            document = json.load(f)
        schema_errors = [e.message for e in validator.iter_errors(document)]
        run = subprocess.run([args.dockhand, "config", "validate", "--no-env", path],
                             capture_output=True, text=True, env=env)
        name = os.path.relpath(path, src)
        schema_ok = not schema_errors
        agent_ok = run.returncode == 0
        verdict = f"schema {'accepts' if schema_ok else 'rejects'}, agent " \
                  f"{'accepts' if agent_ok else 'rejects'} (exit {run.returncode})"
        print(f"{name}: {verdict}")
        if run.returncode not in (0, 2):
            failures.append(f"{name}: dockhand config validate exited {run.returncode}: "
                            f"{run.stderr.strip()}")
        if schema_ok != expect_valid or agent_ok != expect_valid:
            failures.append(f"{name}: expected both to {'accept' if expect_valid else 'reject'}; "
                            f"{verdict}\n  schema: {schema_errors}\n  agent: {run.stderr.strip()}")
        if not agent_ok:
            problems = [l for l in run.stderr.splitlines()[:-1] if l]
            if not problems or any(not l.startswith(path) for l in problems):
                failures.append(f"{name}: every problem should start with the file name:\n"
                                f"{run.stderr}")
    for failure in failures:
        print("FAIL " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
