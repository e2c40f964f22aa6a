#!/usr/bin/env python3
"""The Grafana dashboard (packaging/grafana/dockhand.json) queries only metrics that exist.

Parses the dashboard, takes every PromQL expression of its panels and template variables,
extracts the metric names they select, and checks each against the /metrics of a live agent
(for expressions over $agent_job) or a live driver (over $driver_job): a real
`dockhand-driver run` with one local agent and a one-task job, kept up with --linger while
both are scraped. A name must be a declared family (# TYPE), or a histogram's _bucket, _sum or
_count.

Exit 0: passed; 1: failed.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

# PromQL words that are not metric names (functions are recognised by their '(').
KEYWORDS = {'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'and',
            'or', 'unless', 'offset', 'inf', 'nan'}


def expressions(dashboard):
    """(expr, where) for every PromQL expression in the dashboard."""
    found = []

    def walk(node, where):
        if isinstance(node, dict):
            title = node.get('title') or node.get('name') or where
            if isinstance(node.get('expr'), str):
                found.append((node['expr'], title))
            if node.get('type') == 'query' and 'query' in node:
                query = node['query']
                if isinstance(query, dict):
                    query = query.get('query', '')
                if isinstance(query, str) and query:
                    found.append((query, 'variable ' + str(node.get('name'))))
            for value in node.values():
                walk(value, title)
        elif isinstance(node, list):
            for value in node:
                walk(value, where)

    walk(dashboard, 'dashboard')
    return found


def metric_names(expr):
    """The metric names an expression selects."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)           # string literals
    text = re.sub(r'\{[^}]*\}', '', text)                     # label matchers
    text = re.sub(r'\[[^\]]*\]', '', text)                    # range selectors
    text = re.sub(r'\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)', ' ', text)
    # Grafana's label_values(metric, label): the label is not a metric.
    text = re.sub(r'label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,[^)]*\)', r'(\1)', text)
    text = re.sub(r'\$\w+', ' ', text)                        # $__rate_interval, ...
    names = set()
    for match in re.finditer(r'[a-zA-Z_:][a-zA-Z0-9_:]*', text):
        word = match.group(0)
        rest = text[match.end():].lstrip()
        if rest.startswith('(') or word.lower() in KEYWORDS:
            continue
        if match.start() > 0 and (text[match.start() - 1].isdigit() or
                                  text[match.start() - 1] == '.'):
            continue  # the exponent of a number such as 1e3
        names.add(word)
    return names


def check_extraction():
    """metric_names() on expressions whose answer is known (a broken parser fails here)."""
    cases = {
        'sum by (state) (rate(a_total{job=~"$agent_job", state="b_total"}[$__rate_interval]))':
            {'a_total'},
        'histogram_quantile(0.95, sum by (le) (rate(x_bucket[5m]))) / on(instance) y': {'x_bucket',
                                                                                      'y'},
        'time() - max by (instance) (start_seconds{job="j"}) > 1e3': {'start_seconds'},
        'label_values(m{job=~"$agent_job"}, instance)': {'m'},
        'a and b or c unless d offset 5m': {'a', 'b', 'c', 'd'},
    }
    for expr, want in cases.items():
        got = metric_names(expr)
        if got != want:
            raise AssertionError(f'metric_names({expr!r}) = {got}, expected {want}')


def families(exposition):
    """name -> type of every family the exposition declares."""
    out = {}
    for line in exposition.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == '#' and parts[1] == 'TYPE':
            out[parts[2]] = parts[3]
    return out


def exists(name, declared):
    if name in declared:
        return True
    for suffix in ('_bucket', '_sum', '_count'):
        if name.endswith(suffix) and declared.get(name[:-len(suffix)]) in ('histogram',
                                                                           'summary'):
            return True
    return False


def get(url):
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode('utf-8')


def wait_for(what, predicate, timeout_s):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = predicate()
        except OSError:
            value = None
        if value:
            return value
        if time.monotonic() >= deadline:
            raise RuntimeError(f'timed out after {timeout_s} s waiting for {what}')
        time.sleep(0.1)


def scrape(args, work):
    """(agent /metrics, driver /metrics) of a live driver and agent after a one-task job."""
    job = os.path.join(work, 'job.json')
    with open(job, 'w', encoding='utf-8') as f:
        json.dump({'name': 'dashboard', 'tasks': [{'name': 'one', 'shell': 'echo 1'}]}, f)
    port_file = os.path.join(work, 'port')
    log_path = os.path.join(work, 'driver.log')
    with open(log_path, 'w', encoding='utf-8') as log:
        driver = subprocess.Popen(
            [args.driver, 'run', job, '--local-agents', '1', '--agent-bin', args.agent,
             '--listen', '127.0.0.1:0', '--port-file', port_file, '--linger', '30',
             '--timeout', '30', '--quiet'], stdout=log, stderr=subprocess.STDOUT)
        try:
            port = int(wait_for('the driver port', lambda: os.path.exists(port_file) and
                                open(port_file, encoding='utf-8').read().strip(), 20))
            base = f'http://127.0.0.1:{port}'

            def job_done():
                text = get(base + '/metrics')
                return text if 'dockhand_driver_tasks{state="FINISHED"} 1' in text else None
            wait_for('the job to finish', job_done, 20)
            executors = json.loads(get(base + '/v1/executors'))['executors']
            block_url = executors[0]['block_url'].rstrip('/')
            return get(block_url + '/metrics'), get(base + '/metrics')
        except Exception:
            with open(log_path, encoding='utf-8', errors='replace') as f:
                print('--- driver output:\n' + f.read()[-4000:], file=sys.stderr)
            raise
        finally:
            driver.send_signal(signal.SIGTERM)
            try:
                driver.wait(timeout=20)
            except subprocess.TimeoutExpired:
                driver.kill()
                driver.wait(timeout=10)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--dashboard', required=True)
    parser.add_argument('--driver', required=True, help='the dockhand-driver program')
    parser.add_argument('--agent', required=True, help='the dockhand program')
    args = parser.parse_args()

    check_extraction()
    with open(args.dashboard, encoding='utf-8') as f:
        dashboard = json.load(f)
    exprs = expressions(dashboard)
    if len(exprs) < 10:
        print(f'FAIL: only {len(exprs)} PromQL expressions found in {args.dashboard}')
        return 1
    with tempfile.TemporaryDirectory(prefix='dockhand-dashboard-') as work:
        agent_text, driver_text = scrape(args, work)
    agent, driver = families(agent_text), families(driver_text)
    problems = []
    checked = set()
    for expr, where in exprs:
        names = metric_names(expr)
        if not names:
            problems.append(f'{where}: no metric in {expr!r}')
        for name in sorted(names):
            # Ours, or the standard process series every Prometheus client exports.
            if not name.startswith('dockhand_') and not name.startswith('process_'):
                problems.append(f'{where}: {name!r} is not a Dockhand metric ({expr!r})')
                continue
            # An expression over the driver's job is checked against the driver's output,
            # one over the agents' against an agent's.
            targets = []
            if '$agent_job' in expr:
                targets.append(('agent', agent))
            if '$driver_job' in expr:
                targets.append(('driver', driver))
            if not targets:
                # A variable's query (label_values(metric, job)): either program will do.
                if not (exists(name, agent) or exists(name, driver)):
                    problems.append(f'{where}: {name} is in neither program\'s /metrics')
                continue
            for program, declared in targets:
                checked.add((program, name))
                if not exists(name, declared):
                    problems.append(f'{where}: {name} is not in the {program}\'s /metrics')
    for problem in problems:
        print('FAIL: ' + problem)
    if problems:
        return 1
    print(f'PASS: {len(exprs)} expressions, {len(checked)} (program, metric) pairs found live')
    return 0


if __name__ == '__main__':
    sys.exit(main())
