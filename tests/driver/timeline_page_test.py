#!/usr/bin/env python3
"""The timeline page of `dockhand-driver report EVENT_LOG --html OUT` in a real headless browser.

Runs a job on two local agents with `--event-log`: six tasks that finish and one that fails
its two attempts. Then `dockhand-driver report` must print what the run printed, and the page
it writes, opened from disk in headless Chromium (Selenium and chromedriver), must draw one
bar per launch (eight), each with its task's name, every bar inside the drawing, and the
failed launches in a colour no finished one has.

Exit 0: passed; 1: failed; 77: skipped (Chromium, chromedriver or python3-selenium missing).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import headless_chromium

SKIP = headless_chromium.SKIP


class Failure(Exception):
    pass


def run(command, timeout_s=120):
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    return done.returncode, done.stdout, done.stderr


def check(args, browser, work):
    tasks = [{'name': f'ok-{i}', 'shell': 'sleep 0.2; echo 1'} for i in range(6)]
    tasks.append({'name': 'broken', 'shell': 'sleep 0.1; exit 3'})
    job = os.path.join(work, 'job.json')
    with open(job, 'w', encoding='utf-8') as f:
        json.dump({'name': 'timeline', 'max_attempts': 2, 'tasks': tasks}, f)
    log = os.path.join(work, 'events.jsonl')
    code, live, err = run([args.driver, 'run', job, '--local-agents', '2', '--cores', '2',
                           '--agent-bin', args.agent, '--timeout', '60', '--event-log', log])
    if code != 1:
        raise Failure(f'the run exited {code}, not 1 (a task fails): {live}{err}')
    page = os.path.join(work, 'timeline.html')
    code, replayed, err = run([args.driver, 'report', log, '--html', page])
    if code != 0:
        raise Failure(f'report exited {code}: {err}')
    if replayed != live:
        raise Failure(f'the report differs from the run\'s:\n{replayed}\nthe run printed:\n{live}')

    browser.get('file://' + page)
    bars = browser.execute_script('''
        const svg = document.querySelector('svg.timeline').getBoundingClientRect();
        return [...document.querySelectorAll('rect.task')].map(r => {
          const box = r.getBoundingClientRect();
          return {task: r.dataset.task, state: r.dataset.state,
                  fill: getComputedStyle(r).fill, width: box.width,
                  inside: box.left >= svg.left - 0.5 && box.right <= svg.right + 0.5};
        });''')
    if len(bars) != 8:
        raise Failure(f'{len(bars)} bars drawn, not 8 (6 tasks + 2 attempts of one): {bars}')
    names = sorted(b['task'] for b in bars)
    expected = sorted([f'ok-{i}' for i in range(6)] + ['broken', 'broken'])
    if names != expected:
        raise Failure(f'the bars are of {names}, not {expected}')
    if not all(b['inside'] and b['width'] >= 1 for b in bars):
        raise Failure(f'a bar is outside the drawing or has no width: {bars}')
    failed = {b['fill'] for b in bars if b['state'] == 'FAILED'}
    finished = {b['fill'] for b in bars if b['state'] == 'FINISHED'}
    if len([b for b in bars if b['state'] == 'FAILED']) != 2 or len(finished) == 0:
        raise Failure(f'not two failed launches and six finished ones: {bars}')
    if failed & finished:
        raise Failure(f'failed bars are drawn like finished ones: {failed} and {finished}')
    errors = [e for e in browser.get_log('browser') if e.get('level') == 'SEVERE']
    if errors:
        raise Failure(f'the page logged errors: {errors}')


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--driver', required=True, help='the dockhand-driver program')
    parser.add_argument('--agent', required=True, help='the dockhand program')
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix='dockhand-timeline-') as work:
        try:
            browser = headless_chromium.open_browser(work)
        except headless_chromium.Unavailable as e:
            print(f'SKIP: {e}')
            return SKIP
        try:
            check(args, browser, work)
            print('PASS')
        except (Failure, subprocess.TimeoutExpired) as e:
            print(f'FAIL: {e}', file=sys.stderr)
            return 1
        finally:
            browser.quit()
    return 0


if __name__ == '__main__':
    sys.exit(main())
