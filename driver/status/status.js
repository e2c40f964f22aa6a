// The driver's status page: polls GET /v1/cluster and fills the tables and the job's timeline
// (an SVG drawing of the listed tasks' latest launches). Everything that comes
// from agents or the job is put in as text (never parsed as HTML), and only http(s) URLs
// become links. With a cluster secret, each request is signed here with the secret the user
// enters (Web Crypto HMAC-SHA256, the control API's Authorization scheme); the secret stays
// in this page's memory.
'use strict';

(function () {
  const params = new URLSearchParams(window.location.search);
  const refreshMs = Math.min(60000, Math.max(100, Number(params.get('refresh_ms')) || 2000));
  let key = null;  // the HMAC key made from the secret, when the driver requires one
  let timer = null;

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(props || {})) {
      if (name === 'dataset') Object.assign(node.dataset, value);
      else node[name] = value;
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  // An http(s) URL as a link; anything else as plain text.
  function link(url, label) {
    let parsed = null;
    try {
      parsed = new URL(String(url));
    } catch (e) {
      parsed = null;
    }
    if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
      return el('span', {className: 'muted', title: String(url)}, label + ' (not http)');
    }
    return el('a', {href: parsed.href, rel: 'noopener noreferrer', target: '_blank'}, label);
  }

  function duration(ms) {
    if (ms === null || ms === undefined) return '';
    if (ms < 1000) return ms + ' ms';
    const s = ms / 1000;
    if (s < 60) return s.toFixed(1) + ' s';
    const m = Math.floor(s / 60);
    if (m < 60) return m + ' min ' + Math.round(s - m * 60) + ' s';
    return Math.floor(m / 60) + ' h ' + (m % 60) + ' min';
  }

  function bytes(n) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    let v = Number(n) || 0;
    while (v >= 1024 && i + 1 < units.length) {
      v /= 1024;
      i += 1;
    }
    return (i === 0 ? v : v.toFixed(1)) + ' ' + units[i];
  }

  function hex(buffer) {
    return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, '0')).join('');
  }

  async function authorization(method, path, content) {
    const ts = Date.now();
    const nonce = hex(crypto.getRandomValues(new Uint8Array(16)));
    const message = ['dockhand-block-v1', method, path, content, ts, nonce].join('\n');
    const mac = await crypto.subtle.sign('HMAC', key, new TextEncoder().encode(message));
    return 'Dockhand-HMAC-SHA256 ts=' + ts + ',nonce=' + nonce + ',mac=' + hex(mac);
  }

  function showError(text) {
    document.getElementById('error').textContent = text;
  }

  function resourcesCell(resources) {
    const cell = el('td');
    if (Object.keys(resources || {}).length === 0) cell.append(el('span', {className: 'muted'}, 'none'));
    for (const [name, r] of Object.entries(resources || {})) {
      const inUse = r.in_use || [];
      const all = r.addresses || [];
      cell.append(el('div', {}, name + ': ' + inUse.length + '/' + all.length + ' in use' +
                                    (inUse.length ? ' (' + inUse.join(', ') + ')' : '')));
    }
    return cell;
  }

  function decommissionCell(d) {
    const cell = el('td', {className: 'decommission'});
    if (!d) return cell;
    const total = Number(d.blocks_total) || 0;
    const migrated = Number(d.blocks_migrated) || 0;
    const bar = el('progress', {max: Math.max(total, 1), value: total ? migrated : 0});
    bar.dataset.migrated = migrated;
    bar.dataset.left = Number(d.blocks_left) || 0;
    bar.dataset.total = total;
    cell.append(el('div', {}, String(d.state)), bar,
                el('div', {className: 'muted'},
                   migrated + '/' + total + ' blocks moved, ' + (Number(d.blocks_left) || 0) +
                       ' left, ' + (Number(d.blocks_failed) || 0) + ' failed (' +
                       bytes(d.bytes_migrated) + ' of ' + bytes(d.bytes_total) + ')' +
                       (d.bytes_per_s === null || d.bytes_per_s === undefined
                            ? '' : ', ' + bytes(d.bytes_per_s) + '/s') +
                       (d.eta_ms === null || d.eta_ms === undefined || !(Number(d.blocks_left) > 0)
                            ? '' : ', about ' + duration(Number(d.eta_ms)) + ' left')));
    return cell;
  }

  // What the agent's latest heartbeat said it holds (protocol.md 8.17): its blocks, its own
  // memory and threads, its tasks' processes' memory. Empty before its first heartbeat.
  function holdsCell(m) {
    const cell = el('td', {className: 'holds'});
    m = m || {};
    const parts = [];
    if (m.blocks !== undefined) parts.push(m.blocks + ' blocks (' + bytes(m.block_bytes || 0) + ')');
    if (m.rss_bytes !== undefined) parts.push('agent ' + bytes(m.rss_bytes));
    if (m.threads !== undefined) parts.push(m.threads + ' threads');
    if (m.tasks_rss_bytes !== undefined) parts.push('tasks ' + bytes(m.tasks_rss_bytes));
    for (const part of parts) cell.append(el('div', {}, part));
    return cell;
  }

  function linksCell(agent) {
    const cell = el('td', {className: 'links'});
    for (const [name, url] of Object.entries(agent.log_urls || {})) cell.append(link(url, name));
    if (agent.metrics_url) cell.append(link(agent.metrics_url, 'metrics'));
    return cell;
  }

  // The latest attempt's logs, where its agent serves them (signed like blocks when the cluster
  // authenticates: a browser then gets 401, and `dockhand-driver fetch URL` reads them).
  function taskLinksCell(task) {
    const cell = el('td', {className: 'links'});
    for (const [name, url] of Object.entries(task.log_urls || {})) cell.append(link(url, name));
    return cell;
  }

  function renderAgents(data) {
    const rows = (data.executors || []).map((a) =>
      el('tr', {dataset: {executor: String(a.executor_id), state: String(a.state)}},
         el('td', {}, String(a.executor_id)), el('td', {}, String(a.host)),
         el('td', {className: 'state-' + a.state}, String(a.state)),
         el('td', {className: 'num'}, a.free_cores + '/' + a.cores), resourcesCell(a.resources),
         el('td', {className: 'num'}, a.running_tasks), el('td', {className: 'num'}, a.tasks_finished),
         el('td', {className: 'num'}, a.tasks_failed), el('td', {className: 'num'}, a.blocks),
         holdsCell(a.metrics), decommissionCell(a.decommission), linksCell(a)));
    document.querySelector('#agents tbody').replaceChildren(...rows);
    document.getElementById('agent-count').textContent = '(' + rows.length + ')';
    document.getElementById('blocks-summary').textContent =
        data.blocks + ' block(s) known, ' + data.fallback_blocks + ' in the fallback store';
  }

  const SVG = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  // Each launch of the listed tasks (the latest, and the earlier ones a retry or a rerun
  // followed) as a bar over time (ms before now), on a row per agent and slot: launches that
  // overlap on an agent take separate slots. Running bars reach now.
  function renderTimeline(tasks) {
    const box = document.getElementById('timeline');
    const launches = [];
    for (const t of tasks) {
      for (const a of t.earlier_attempts || []) launches.push({name: t.name, ...a});
      if (t.started_ms_ago !== null && t.started_ms_ago !== undefined) {
        launches.push({name: t.name, executor_id: t.executor_id, state: t.state,
                       started_ms_ago: t.started_ms_ago, duration_ms: t.duration_ms});
      }
    }
    const bars = launches.map((t) => {
      const start = -Number(t.started_ms_ago);
      const running = t.state === 'RUNNING';
      const end = running ? 0 : Math.min(0, start + (Number(t.duration_ms) || 0));
      return {task: t, agent: String(t.executor_id || ''), start: start, end: end};
    }).sort((a, b) => a.start - b.start);
    if (bars.length === 0) {
      box.replaceChildren();
      return;
    }
    const rows = [];
    const slots = new Map();  // agent -> [end of each slot's last bar]
    for (const agent of [...new Set(bars.map((b) => b.agent))].sort()) slots.set(agent, []);
    const rowOf = new Map();  // `${agent} ${slot}` -> row index
    for (const bar of bars) {
      const free = slots.get(bar.agent);
      let slot = free.findIndex((end) => end <= bar.start);
      if (slot < 0) {
        slot = free.length;
        free.push(bar.end);
      } else {
        free[slot] = bar.end;
      }
      bar.slot = slot;
    }
    for (const [agent, free] of slots) {
      free.forEach((_, slot) => {
        rowOf.set(agent + ' ' + slot, rows.length);
        rows.push(agent + ' #' + (slot + 1));
      });
    }
    const label = 140;
    const width = 900;
    const rowHeight = 18;
    const axis = 20;
    const from = Math.min(...bars.map((b) => b.start));
    const span = Math.max(1, -from);
    const x = (ms) => label + (ms - from) * width / span;
    const drawing = svg('svg', {width: label + width + 10, height: axis + rows.length * rowHeight,
                                role: 'img'});
    for (let i = 0; i <= 4; i += 1) {
      const at = from + span * i / 4;
      drawing.append(svg('line', {class: 'tick', x1: x(at), x2: x(at), y1: axis - 4,
                                  y2: axis + rows.length * rowHeight}));
      drawing.append(svg('text', {x: x(at), y: 12,
                                  'text-anchor': i === 0 ? 'start' : i === 4 ? 'end' : 'middle'},
                         i === 4 ? 'now' : '-' + duration(Math.round(-at))));
    }
    rows.forEach((name, i) => drawing.append(svg('text', {x: 2, y: axis + i * rowHeight + 12},
                                                  name)));
    for (const bar of bars) {
      const row = rowOf.get(bar.agent + ' ' + bar.slot);
      const rect = svg('rect', {class: 'task ' + bar.task.state, x: x(bar.start),
                                y: axis + row * rowHeight + 2,
                                width: Math.max(1, x(bar.end) - x(bar.start)),
                                height: rowHeight - 4,
                                'data-task': String(bar.task.name),
                                'data-state': String(bar.task.state)});
      rect.append(svg('title', {}, bar.task.name + ' on ' + bar.agent + ': ' + bar.task.state +
                                       ', ' + duration(Math.round(bar.end - bar.start))));
      drawing.append(rect);
    }
    box.replaceChildren(drawing);
  }

  function cpuCell(t) {
    const m = t.metrics || {};
    return el('td', {className: 'num'},
              m.cpu_time_ms === undefined ? '' : duration(Number(m.cpu_time_ms)));
  }

  function memoryCell(t) {
    const m = t.metrics || {};
    return el('td', {className: 'num'},
              m.peak_rss_bytes === undefined ? '' : bytes(m.peak_rss_bytes));
  }

  function renderJob(job) {
    const body = document.querySelector('#tasks tbody');
    const name = document.getElementById('job-name');
    const summary = document.getElementById('job-summary');
    const note = document.getElementById('tasks-note');
    if (!job) {
      name.textContent = '';
      summary.textContent = 'no job';
      summary.dataset.state = 'NONE';
      body.replaceChildren();
      note.textContent = '';
      renderTimeline([]);
      return;
    }
    name.textContent = String(job.name);
    summary.dataset.state = String(job.state);
    summary.textContent = job.state + ': ' + job.finished + ' of ' + job.total + ' finished, ' +
        job.running + ' running, ' + job.pending + ' pending, ' + job.failed + ' failed, ' +
        job.retries + ' retried' + (job.failure_reason ? ' (' + job.failure_reason + ')' : '');
    const tasks = job.tasks || [];
    const rows = tasks.map((t) =>
      el('tr', {dataset: {task: String(t.name), state: String(t.state)}},
         el('td', {}, String(t.name)), el('td', {className: 'state-' + t.state}, String(t.state)),
         el('td', {className: 'num'}, t.task_id || ''), el('td', {}, String(t.executor_id || '')),
         el('td', {className: 'num'}, t.attempts), el('td', {className: 'num'}, duration(t.duration_ms)),
         cpuCell(t), memoryCell(t), el('td', {}, String(t.reason || '')), taskLinksCell(t)));
    body.replaceChildren(...rows);
    renderTimeline(tasks);
    const omitted = Number(job.tasks_omitted) || 0;
    note.textContent = omitted > 0
        ? rows.length + ' of ' + (tasks.length + omitted) + ' tasks are listed (running and ' +
              'failed ones first)' : '';
  }

  async function poll() {
    timer = null;
    const needsKey = document.body.dataset.auth === 'required';
    if (needsKey && !key) {
      document.getElementById('auth').hidden = false;
      return;  // polling starts once a secret is entered
    }
    try {
      const headers = {Accept: 'application/json'};
      if (key) headers.Authorization = await authorization('GET', '/v1/cluster', '');
      const response = await fetch('v1/cluster', {headers: headers, cache: 'no-store'});
      if (response.status === 401) {
        key = null;
        document.getElementById('auth').hidden = false;
        const body = await response.json().catch(() => ({}));
        showError('the driver refused the request: ' + (body.error || 'HTTP 401'));
        return;
      }
      if (!response.ok) throw new Error('HTTP ' + response.status);
      const data = await response.json();
      document.getElementById('auth').hidden = true;
      renderAgents(data);
      renderJob(data.job);
      showError('');
      document.getElementById('updated').textContent =
          'updated ' + new Date().toLocaleTimeString();
    } catch (e) {
      showError('cannot load the cluster state: ' + e.message);
    }
    timer = window.setTimeout(poll, refreshMs);
  }

  async function useSecret(event) {
    event.preventDefault();
    const input = document.getElementById('secret');
    if (!window.crypto || !crypto.subtle) {
      showError('signing needs Web Crypto, which browsers offer only over https:// or on ' +
                'localhost; reach the driver over TLS or through an SSH tunnel');
      return;
    }
    key = await crypto.subtle.importKey('raw', new TextEncoder().encode(input.value),
                                        {name: 'HMAC', hash: 'SHA-256'}, false, ['sign']);
    input.value = '';
    showError('');
    if (timer !== null) window.clearTimeout(timer);
    poll();
  }

  document.addEventListener('DOMContentLoaded', () => {
    document.getElementById('auth-form').addEventListener('submit', useSecret);
    poll();
  });
})();
