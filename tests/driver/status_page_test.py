#!/usr/bin/env python3
"""The driver's status page (GET /) in a real headless browser.

Starts `dockhand-driver run` with two local agents, opens the page in headless Chromium
(Selenium and chromedriver) and checks that it loads without a console error, shows the
agents and the tasks of the running job (text from the job shown as text, only http(s) URLs
as links) with a timeline bar for each task, and that the progress bar of a decommission moves while the agent's blocks
migrate (throttled by the agents' decommission.bandwidth_bytes_per_s so that it takes a
couple of seconds). A second driver with a cluster secret shows its page only once the
secret is entered (the page signs its requests with it).

Exit 0: passed; 1: failed; 77: skipped (Chromium, chromedriver or python3-selenium missing).
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
import urllib.error
import urllib.request

import headless_chromium

SKIP = headless_chromium.SKIP
BLOCKS = 8           # blocks written by the job, 1 MiB each
BANDWIDTH = 2 << 20  # bytes/s each agent's decommission may move
TASK_WITH_MARKUP = '<b id="injected">bold</b>'


class Failure(Exception):
    pass


def wait_for(what, predicate, timeout_s, interval_s=0.05):
    """Calls predicate until it returns something true, at most timeout_s; returns that."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise Failure(f'timed out after {timeout_s} s waiting for {what}')
        time.sleep(interval_s)


def write_json(path, value):
    with open(path, 'w', encoding='utf-8') as f:
        json.dump(value, f, indent=2)
    return path


class Driver:
    """A `dockhand-driver run` this test started (and alone stops)."""

    def __init__(self, args, work, name, job, extra=()):
        self.log_path = os.path.join(work, name + '.log')
        port_file = os.path.join(work, name + '.port')
        env = dict(os.environ)
        # The agents register these log URLs (their environment is the driver's): one to
        # link, and one that must never become a link.
        env['DOCKHAND_LOG_URL_STDOUT'] = 'http://127.0.0.1:9/logs/stdout?a=1&b=<2>'
        env['DOCKHAND_LOG_URL_STDERR'] = 'javascript:alert(1)'
        command = [args.driver, 'run', job, '--local-agents', '2', '--cores', '2',
                   '--agent-bin', args.agent, '--listen', '127.0.0.1:0', '--port-file',
                   port_file, '--agent-config', args.agent_config, '--config',
                   args.driver_config, '--linger', '40', '--timeout', '60', '--quiet',
                   '--log-level', 'info', *extra]
        self.log = open(self.log_path, 'w', encoding='utf-8')
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT,
                                        env=env)
        text = wait_for('the driver to write its port file',
                        lambda: self.process.poll() is None and os.path.exists(port_file) and
                        open(port_file, encoding='utf-8').read().strip(), 20)
        self.port = int(text)
        self.url = f'http://127.0.0.1:{self.port}'

    def cluster(self):
        with urllib.request.urlopen(self.url + '/v1/cluster', timeout=5) as response:
            return json.load(response)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.log.close()

    def output(self):
        with open(self.log_path, encoding='utf-8', errors='replace') as f:
            return f.read()[-6000:]


# Reads the page's tables in one go (no stale elements between two reads).
READ_PAGE = '''
const agents = Array.from(document.querySelectorAll('#agents tbody tr')).map((tr) => {
  const bar = tr.querySelector('progress');
  return {id: tr.dataset.executor, state: tr.dataset.state,
          progress: bar ? [Number(bar.value), Number(bar.max)] : null,
          links: Array.from(tr.querySelectorAll('.links a')).map((a) => [a.textContent, a.href]),
          text: tr.textContent};
});
const tasks = Array.from(document.querySelectorAll('#tasks tbody tr')).map(
    (tr) => ({name: tr.cells[0].textContent, state: tr.dataset.state,
              links: Array.from(tr.querySelectorAll('.links a')).map((a) => [a.textContent, a.href])}));
return {agents: agents, tasks: tasks,
        job: document.getElementById('job-summary').dataset.state || '',
        error: document.getElementById('error').textContent,
        auth_shown: !document.getElementById('auth').hidden,
        injected: document.querySelectorAll('#injected').length};
'''


def leave_page(browser):
    """The console's SEVERE entries for the page, read before its driver stops (the page
    would then log each poll that cannot connect); the browser moves to a blank page."""
    errors = [e for e in browser.get_log('browser') if e.get('level') == 'SEVERE']
    browser.get('about:blank')
    return errors


def check_job_and_decommission(args, browser, work):
    gate = os.path.join(work, 'gate')
    tasks = [{'name': TASK_WITH_MARKUP if i == 0 else f'write-{i}',
              'shell': f'head -c 1048576 /dev/urandom > "$DOCKHAND_OUTPUT_DIR/rdd_1_{i}"',
              'outputs': [f'rdd_1_{i}']} for i in range(BLOCKS)]
    # Fails its first attempt: the timeline shows both launches.
    marker = os.path.join(work, 'retried-once')
    tasks.append({'name': 'retried',
                  'shell': f'if [ -e "{marker}" ]; then exit 0; fi; touch "{marker}"; exit 3'})
    # Holds the job open until the test has seen it running (bounded: 30 s at most).
    tasks.append({'name': 'gate',
                  'shell': f'i=0; while [ ! -e "{gate}" ] && [ $i -lt 600 ]; do sleep 0.05; '
                           'i=$((i+1)); done'})
    job = write_json(os.path.join(work, 'job.json'), {'name': 'status-page', 'tasks': tasks})
    driver = Driver(args, work, 'driver', job)
    try:
        browser.get(driver.url + '/?refresh_ms=150')
        if 'Dockhand driver' not in browser.title:
            raise Failure(f'unexpected page title {browser.title!r}')

        def running():
            page = browser.execute_script(READ_PAGE)
            ids = sorted(a['id'] for a in page['agents'])
            writers_done = sum(1 for t in page['tasks'] if t['name'] not in ('gate', 'retried')
                               and t['state'] == 'FINISHED')
            gate_running = any(t['name'] == 'gate' and t['state'] == 'RUNNING'
                               for t in page['tasks'])
            ok = (ids == ['agent-1', 'agent-2'] and page['job'] == 'RUNNING' and
                  writers_done == BLOCKS and gate_running)
            return page if ok else None
        page = wait_for('the page to show both agents and the running job', running, 20)
        for agent in page['agents']:
            links = dict(agent['links'])
            if not links.get('metrics', '').endswith('/metrics'):
                raise Failure(f'{agent["id"]}: no metrics link in {agent["links"]}')
            if links.get('stdout') != 'http://127.0.0.1:9/logs/stdout?a=1&b=%3C2%3E':
                raise Failure(f'{agent["id"]}: wrong stdout log link in {agent["links"]}')
            if 'stderr' in links:
                raise Failure(f'{agent["id"]}: a javascript: URL became a link')
        # Each task that ran links to its own output on its agent's block server.
        for task in page['tasks']:
            if task['state'] != 'FINISHED':
                continue
            links = dict(task['links'])
            if not re.search(r'/v1/tasks/\d+/logs/stdout$', links.get('stdout', '')):
                raise Failure(f'task {task["name"]}: no stdout log link in {task["links"]}')
        # What each agent's heartbeats say it holds: its threads and blocks (the writers' blocks
        # land on one agent or the other, so only the threads are certain for both).
        def holds_shown():
            agents = browser.execute_script(READ_PAGE)['agents']
            return agents if all(re.search(r'\d+ threads', a['text']) for a in agents) else None
        wait_for('each agent row to show what its heartbeat says it holds', holds_shown, 20)
        if page['injected'] != 0:
            raise Failure('markup from a task name became an element')
        if not any(t['name'] == TASK_WITH_MARKUP for t in page['tasks']):
            raise Failure('the task whose name holds markup is not shown as text')

        open(gate, 'w', encoding='utf-8').close()
        wait_for('the job to succeed on the page',
                 lambda: browser.execute_script(READ_PAGE)['job'] == 'SUCCEEDED', 20)
        # The live timeline: one bar per launch, each its task's (names as text): every task's
        # finished one, and the retried task's failed first attempt.
        def all_bars_finished():
            bars = browser.execute_script(
                "return Array.from(document.querySelectorAll('#timeline rect.task'))"
                ".map((r) => [r.dataset.task, r.dataset.state]);")
            failed = [name for name, state in bars if state != 'FINISHED']
            done = len(bars) == len(tasks) + 1 and failed == ['retried']
            return bars if done else None
        bars = wait_for('the timeline to draw every launch', all_bars_finished, 10)
        if sorted(name for name, _ in bars) != sorted([t['name'] for t in tasks] + ['retried']):
            raise Failure(f'the timeline\'s bars are not the launches: {bars}')

        cluster = driver.cluster()
        holder = max(cluster['executors'], key=lambda a: a['blocks'])
        if holder['blocks'] < 2:
            raise Failure(f'no agent holds two blocks or more: {cluster["executors"]}')
        request = urllib.request.Request(
            f'{driver.url}/v1/executors/{holder["executor_id"]}/decommission',
            data=b'{"reason": "status page test"}', method='POST')
        with urllib.request.urlopen(request, timeout=5) as response:
            if response.status != 200:
                raise Failure(f'decommission refused: HTTP {response.status}')

        # Every progress value the page shows for the agent, until it has left.
        seen = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            page = browser.execute_script(READ_PAGE)
            row = next((a for a in page['agents'] if a['id'] == holder['executor_id']), None)
            if row is None:
                break
            if row['progress'] and (not seen or seen[-1] != tuple(row['progress'])):
                seen.append(tuple(row['progress']))
            time.sleep(0.05)
        print(f'{holder["executor_id"]} held {holder["blocks"]} blocks; progress seen: {seen}')
        moved = [value for value, maximum in seen if maximum >= holder['blocks']]
        if len(set(moved)) < 2:
            raise Failure(f'the decommission progress did not change on the page: {seen}')
        if sorted(moved) != moved:
            raise Failure(f'the decommission progress went backwards: {seen}')
        errors = leave_page(browser)
        if errors:
            raise Failure(f'console errors on the status page: {errors}')
    except Exception:
        print('--- driver output:\n' + driver.output(), file=sys.stderr)
        raise
    finally:
        driver.stop()


def check_secret(args, browser, work):
    secret_file = os.path.join(work, 'secret')
    secret = 'status-page-test-secret-0123456789'
    with open(os.open(secret_file, os.O_WRONLY | os.O_CREAT, 0o600), 'w') as f:
        f.write(secret + '\n')
    job = write_json(os.path.join(work, 'job-secret.json'),
                     {'name': 'signed', 'tasks': [{'name': 'one', 'shell': 'true'}]})
    driver = Driver(args, work, 'driver-secret', job, ['--auth-secret-file', secret_file])
    try:
        try:
            driver.cluster()
            raise Failure('GET /v1/cluster without a signature was answered')
        except urllib.error.HTTPError as e:
            if e.code != 401:
                raise Failure(f'GET /v1/cluster without a signature: HTTP {e.code}, not 401')
        browser.get(driver.url + '/?refresh_ms=150')
        wait_for('the page to ask for the secret',
                 lambda: browser.execute_script(READ_PAGE)['auth_shown'], 10)
        browser.find_element('id', 'secret').send_keys(secret)
        browser.find_element('css selector', '#auth-form button').click()
        wait_for('the page to show the agents with the secret',
                 lambda: sorted(a['id'] for a in browser.execute_script(READ_PAGE)['agents'])
                 == ['agent-1', 'agent-2'], 20)
        if browser.execute_script(READ_PAGE)['auth_shown']:
            raise Failure('the secret form is still shown after the agents loaded')
        errors = leave_page(browser)
        if errors:
            raise Failure(f'console errors on the signed status page: {errors}')
    except Exception:
        print('--- driver output:\n' + driver.output(), file=sys.stderr)
        raise
    finally:
        driver.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--driver', required=True, help='the dockhand-driver program')
    parser.add_argument('--agent', required=True, help='the dockhand program')
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix='dockhand-status-page-') as work:
        args.agent_config = write_json(os.path.join(work, 'agent.json'), {
            'decommission': {'enabled': True, 'check_interval_ms': 100, 'max_concurrent': 1,
                             'bandwidth_bytes_per_s': BANDWIDTH, 'migration': ['peer']}})
        args.driver_config = write_json(os.path.join(work, 'driver.json'),
                                        {'heartbeat_interval_ms': 100})
        try:
            browser = headless_chromium.open_browser(work)
        except headless_chromium.Unavailable as e:
            print(f'SKIP: {e}')
            return SKIP
        try:
            started = time.monotonic()
            check_job_and_decommission(args, browser, work)
            check_secret(args, browser, work)
            print(f'PASS in {time.monotonic() - started:.1f} s')
        except Failure as e:
            print(f'FAIL: {e}', file=sys.stderr)
            return 1
        finally:
            browser.quit()
    return 0


if __name__ == '__main__':
    sys.exit(main())
