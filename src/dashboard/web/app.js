/* shoal's dashboard page: the runs' metrics.jsonl lines (README.md,
 * "Metrics") drawn with Chart.js, kept up to date by the server's event
 * stream (/api/events).  Everything is read from the server this page
 * came from; nothing is fetched from anywhere else. */
'use strict';

const token = new URLSearchParams(location.search).get('token');
function api(path, params) {
  const q = new URLSearchParams(params || {});
  if (token) q.set('token', token);
  const s = q.toString();
  return path + (s ? '?' + s : '');
}

const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf',
  '#bcbd22', '#7f7f7f', '#393b79', '#637939', '#8c6d31', '#843c39', '#7b4173'];

/* ---- what the page knows ------------------------------------------------ */

const state = {
  runs: new Map(),       // id -> Run
  order: [],             // ids as the server lists them
  compares: [],          // [{id, report}]
  selected: new Set(),
  chosenByUser: false,
  colors: new Map(),
  source: null,
  dirty: true,
};

function newRun(id) {
  return {
    id, next: 0, generation: -1, damaged: 0, vtime: false,
    units: new Map(),     // "g0 w0" -> [{time, vtime, samples, step, loss, accuracy, sps, compute, wait, peer}]
    tests: new Map(),     // "g0" -> [{time, vtime, samples, step, loss, accuracy}]
    procs: new Map(),     // rank -> {bytes: [{time, vtime, sent, received}], hist: [], updates, dropped}
    layout: null,         // the launcher's "layout" line
    ranks: new Map(),     // rank -> last "rank" line
    restarts: [],         // "restart" lines
  };
}

function num(v) { return typeof v === 'number' && isFinite(v) ? v : null; }

/* One metrics.jsonl line into run r. */
function take(r, o) {
  const time = num(o.time);
  if (time === null || typeof o.phase !== 'string') return;
  const vtime = num(o.vtime);
  if (vtime !== null) r.vtime = true;
  if (o.phase === 'train') {
    const key = 'g' + o.group + ' w' + o.worker;
    if (!r.units.has(key)) r.units.set(key, []);
    r.units.get(key).push({ time, vtime, samples: num(o.samples), step: num(o.step), loss: num(o.loss),
      accuracy: num(o.accuracy), sps: num(o.samples_per_sec), compute: num(o.compute_s) || 0,
      wait: num(o.wait_s) || 0, peer: num(o.peer_wait_s) || 0 });
  } else if (o.phase === 'test') {
    const key = 'g' + o.group;
    if (!r.tests.has(key)) r.tests.set(key, []);
    r.tests.get(key).push({ time, vtime, samples: num(o.samples), step: num(o.step), loss: num(o.loss),
      accuracy: num(o.accuracy) });
  } else if (o.phase === 'process') {
    if (!r.procs.has(o.rank)) r.procs.set(o.rank, { bytes: [], hist: [], updates: 0, dropped: 0 });
    const p = r.procs.get(o.rank);
    p.bytes.push({ time, vtime, sent: num(o.bytes_sent), received: num(o.bytes_received) });
    if (Array.isArray(o.staleness_hist)) {
      o.staleness_hist.forEach((n, i) => { p.hist[i] = (p.hist[i] || 0) + (num(n) || 0); });
      p.serves = true;
    }
    p.updates += num(o.updates) || 0;
    p.dropped += num(o.dropped) || 0;
  } else if (o.phase === 'cluster') {
    if (o.event === 'layout') { r.layout = o; r.ranks = new Map(); }
    else if (o.event === 'rank') r.ranks.set(o.rank, o);
    else if (o.event === 'restart') r.restarts.push(o);
  }
}

function takeLines(id, msg) {
  let r = state.runs.get(id);
  if (!r) return;
  if (msg.generation !== r.generation || msg.from !== r.next) {
    if (msg.from !== 0) { resync(id); return; }     // a gap: read the run again
    const fresh = newRun(id);
    state.runs.set(id, fresh);
    r = fresh;
    r.generation = msg.generation;
  }
  for (const o of msg.lines) take(r, o);
  r.next = msg.next;
  r.damaged = msg.damaged;
  state.dirty = true;
}

async function fetchJSON(path, params) {
  const res = await fetch(api(path, params), { cache: 'no-store' });
  if (!res.ok) throw new Error(path + ': ' + res.status);
  return res.json();
}

async function resync(id) {
  const msg = await fetchJSON('/api/metrics', { run: id, from: 0 });
  const r = newRun(id);
  r.generation = msg.generation;
  state.runs.set(id, r);
  takeLines(id, msg);
}

/* ---- the live feed -------------------------------------------------------- */

function setStatus(text, cls) {
  const s = document.getElementById('status');
  s.textContent = text;
  s.className = 'status ' + (cls || '');
}

function connect() {
  if (state.source) state.source.close();
  const watch = {};
  for (const id of state.order) watch[id] = state.runs.get(id).next;
  const es = new EventSource(api('/api/events', { watch: JSON.stringify(watch) }));
  state.source = es;
  es.onopen = () => setStatus('live', 'live');
  es.addEventListener('lines', ev => { const m = JSON.parse(ev.data); takeLines(m.run, m); });
  es.addEventListener('reset', ev => { const m = JSON.parse(ev.data); resync(m.run); });
  es.addEventListener('runs', () => loadRuns());
  es.onerror = () => {
    /* what the stream missed is read again when it comes back */
    setStatus('reconnecting', 'down');
    es.close();
    setTimeout(() => loadRuns().catch(() => setStatus('server gone', 'down')), 2000);
  };
}

async function loadRuns() {
  const list = await fetchJSON('/api/runs');
  state.compares = list.compares;
  const ids = list.runs.map(r => r.id);
  const known = new Set(state.order);
  state.order = ids;
  for (const r of list.runs) {
    if (!state.colors.has(r.id)) state.colors.set(r.id, PALETTE[state.colors.size % PALETTE.length]);
    const mine = state.runs.get(r.id);
    if (!mine || mine.generation !== r.generation) {
      const msg = await fetchJSON('/api/metrics', { run: r.id, from: 0 });
      const fresh = newRun(r.id);
      fresh.generation = msg.generation;
      state.runs.set(r.id, fresh);
      takeLines(r.id, msg);
    } else if (mine.next < r.lines) {
      takeLines(r.id, await fetchJSON('/api/metrics', { run: r.id, from: mine.next }));
    }
    if (!known.has(r.id) && !state.chosenByUser) state.selected.add(r.id);
  }
  for (const id of [...state.runs.keys()]) if (!ids.includes(id)) { state.runs.delete(id); state.selected.delete(id); }
  drawRunList();
  await drawCompare();
  connect();
  state.dirty = true;
}

/* ---- the run selector --------------------------------------------------- */

function drawRunList() {
  const box = document.getElementById('run-list');
  box.textContent = '';
  const groups = new Map();
  for (const id of state.order) {
    const cut = id.lastIndexOf('/');
    const group = cut > 0 ? id.slice(0, cut) : '';
    if (!groups.has(group)) groups.set(group, []);
    groups.get(group).push(id);
  }
  let damaged = 0;
  for (const [group, ids] of groups) {
    const div = document.createElement('div');
    div.className = 'run-group';
    if (group) { const b = document.createElement('b'); b.textContent = group + '/'; div.appendChild(b); }
    for (const id of ids) {
      const label = document.createElement('label');
      const box = document.createElement('input');
      box.type = 'checkbox';
      box.checked = state.selected.has(id);
      box.dataset.run = id;
      box.onchange = () => {
        state.chosenByUser = true;
        if (box.checked) state.selected.add(id); else state.selected.delete(id);
        state.dirty = true;
      };
      const sw = document.createElement('span');
      sw.className = 'swatch';
      sw.style.background = state.colors.get(id);
      label.append(box, sw, document.createTextNode(id.slice(id.lastIndexOf('/') + 1)));
      div.appendChild(label);
      damaged += state.runs.get(id) ? state.runs.get(id).damaged : 0;
    }
    box.appendChild(div);
  }
  document.getElementById('damaged').textContent =
    damaged ? damaged + ' damaged metrics line' + (damaged === 1 ? '' : 's') + ' skipped' : '';
}

/* ---- the comparison's table ----------------------------------------------- */

/* The tables of a markdown report, as HTML tables (text only). */
function markdownTables(md) {
  const out = [];
  let rows = null;
  for (const line of md.split('\n')) {
    if (/^\s*\|/.test(line)) {
      const cells = line.trim().replace(/^\||\|$/g, '').split('|').map(c => c.trim());
      if (cells.every(c => /^:?-+:?$/.test(c))) continue;
      (rows = rows || []).push(cells);
    } else if (rows) { out.push(rows); rows = null; }
  }
  if (rows) out.push(rows);
  return out.map(rows => {
    const t = document.createElement('table');
    rows.forEach((cells, i) => {
      const tr = t.insertRow();
      for (const c of cells) {
        const td = document.createElement(i === 0 ? 'th' : 'td');
        td.textContent = c.replace(/\*\*/g, '').replace(/`/g, '');
        tr.appendChild(td);
      }
    });
    return t;
  });
}

async function drawCompare() {
  const sec = document.getElementById('compare');
  const c = state.compares.find(c => c.report) || state.compares[0];
  if (!c) { sec.hidden = true; return; }
  sec.hidden = false;
  document.getElementById('compare-name').textContent = c.id;
  const box = document.getElementById('compare-table');
  box.textContent = '';
  if (!c.report) {
    box.innerHTML = '<p class="note">The report comes when the last scheme has run; the schemes so far are overlaid below.</p>';
    return;
  }
  const res = await fetch(api('/api/report', { compare: c.id }), { cache: 'no-store' });
  if (!res.ok) return;
  const tables = markdownTables(await res.text());
  if (tables.length) box.appendChild(tables[0]);
}

/* ---- the cluster -------------------------------------------------------------- */

const openFolds = new Set();   // runs whose cluster table the user opened

function drawCluster() {
  const box = document.getElementById('cluster');
  const runs = state.order.filter(id => state.selected.has(id) && state.runs.get(id).layout);
  document.getElementById('restarts').textContent = '';
  if (!runs.length) return;
  box.textContent = '';
  let restarts = 0;
  for (const id of runs) {
    const r = state.runs.get(id);
    restarts += r.restarts.length;
    /* several runs: each folded, unless one of its ranks is in trouble */
    const fold = document.createElement('details');
    const h = document.createElement('summary');
    h.className = 'note';
    h.textContent = id + ': ' + r.layout.ranks.length + ' processes on ' + r.layout.host + ', ' + r.layout.nslices +
      ' slices; heartbeat every ' + r.layout.heartbeat_interval + ' s, lost after ' + r.layout.heartbeat_timeout + ' s' +
      (r.restarts.length ? '; restarts: ' + r.restarts.map(x => 'rank ' + x.rank + ' at ' + x.time.toFixed(1) + ' s (' + x.why + ')').join(', ') : '');
    const t = document.createElement('table');
    t.className = 'ranks';
    t.dataset.run = id;
    const head = t.insertRow();
    for (const c of ['rank', 'endpoint', 'holds', 'server slices', 'state', 'since (s)', 'why']) {
      const th = document.createElement('th'); th.textContent = c; head.appendChild(th);
    }
    for (const rank of r.layout.ranks) {
      const ev = r.ranks.get(rank.rank);
      const tr = t.insertRow();
      tr.dataset.rank = rank.rank;
      const st = ev ? ev.state : 'waiting';
      tr.dataset.state = st;
      const cells = [rank.rank, rank.endpoint || '-', rank.holds, rank.slices && rank.slices.length ? rank.slices.join(' ') : '-'];
      for (const c of cells) tr.insertCell().textContent = c;
      const s = document.createElement('span');
      s.className = 'state state-' + st;
      s.textContent = st;
      tr.insertCell().appendChild(s);
      tr.insertCell().textContent = ev ? ev.time.toFixed(1) : '';
      tr.insertCell().textContent = ev && ev.why ? ev.why : '';
    }
    const trouble = [...r.ranks.values()].some(ev => ['late', 'lost', 'failed'].includes(ev.state));
    fold.open = runs.length <= 2 || trouble || openFolds.has(id);
    fold.ontoggle = () => { if (fold.open) openFolds.add(id); else openFolds.delete(id); };
    fold.append(h, t);
    box.appendChild(fold);
  }
  document.getElementById('restarts').textContent = restarts ? restarts + ' launcher restart' + (restarts === 1 ? '' : 's') : '';
}

/* ---- charts ---------------------------------------------------------------------- */

const charts = new Map();   // name -> {chart, card, kind}

/* TensorBoard's smoothing: an exponential moving average, debiased so
 * the first points are not pulled towards 0. */
function smooth(points, weight) {
  if (weight <= 0) return points;
  let last = 0, n = 0;
  return points.map(p => {
    if (p.y === null) return p;
    last = last * weight + (1 - weight) * p.y;
    n++;
    return { x: p.x, y: last / (1 - Math.pow(weight, n)) };
  });
}

/* the points of rows' field against the x axis (another axis: `axis`) */
function series(rows, field, axis) {
  axis = axis || document.getElementById('x-axis').value;
  const pts = [];
  for (const p of rows) {
    const x = p[axis], y = p[field];
    if (x !== null && x !== undefined && y !== null && y !== undefined) pts.push({ x, y });
  }
  pts.sort((a, b) => a.x - b.x);
  return pts;
}

/* a run's colour, lighter or darker per unit */
function shade(hex, i, n) {
  if (n <= 1) return hex;
  const v = parseInt(hex.slice(1), 16);
  const f = 0.55 + 0.9 * (i / (n - 1));
  const c = [v >> 16, (v >> 8) & 255, v & 255].map(x => Math.max(0, Math.min(255, Math.round(x * f))));
  return '#' + c.map(x => x.toString(16).padStart(2, '0')).join('');
}

const whiteBackground = {
  id: 'whiteBackground',
  beforeDraw(chart) {
    const ctx = chart.ctx;
    ctx.save();
    ctx.globalCompositeOperation = 'destination-over';
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, chart.width, chart.height);
    ctx.restore();
  },
};

function card(name, title) {
  if (charts.has(name)) return charts.get(name);
  const div = document.createElement('div');
  div.className = 'card';
  div.id = 'chart-' + name;
  div.dataset.points = '0';
  const h = document.createElement('h3');
  h.textContent = title;
  const tools = document.createElement('span');
  tools.className = 'tools';
  const csv = document.createElement('button');
  csv.type = 'button'; csv.textContent = 'CSV';
  const png = document.createElement('button');
  png.type = 'button'; png.textContent = 'PNG';
  tools.append(csv, png);
  h.appendChild(tools);
  const boxDiv = document.createElement('div');
  boxDiv.className = 'canvas-box';
  const canvas = document.createElement('canvas');
  boxDiv.appendChild(canvas);
  const empty = document.createElement('p');
  empty.className = 'empty';
  div.append(h, boxDiv, empty);
  document.getElementById('charts').appendChild(div);
  const entry = { name, card: div, canvas, empty, chart: null };
  csv.onclick = () => downloadCSV(entry);
  png.onclick = () => {
    if (!entry.chart) return;
    const a = document.createElement('a');
    a.href = entry.chart.toBase64Image('image/png');
    a.download = name + '.png';
    a.click();
  };
  charts.set(name, entry);
  return entry;
}

function downloadCSV(entry) {
  if (!entry.chart) return;
  const lines = ['series,x,y'];
  const labels = entry.chart.data.labels;
  for (const ds of entry.chart.data.datasets)
    ds.data.forEach((p, i) => {
      const x = typeof p === 'object' ? p.x : labels[i];
      const y = typeof p === 'object' ? p.y : p;
      lines.push('"' + ds.label.replace(/"/g, '""') + '",' + x + ',' + y);
    });
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([lines.join('\n') + '\n'], { type: 'text/csv' }));
  a.download = entry.name + '.csv';
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

function axisTitle() {
  const sel = document.getElementById('x-axis');
  return sel.options[sel.selectedIndex].text;
}

/* A line chart of datasets [{label, color, data: [{x, y}]}]. */
function lineChart(name, title, yTitle, datasets, opts) {
  const entry = card(name, title);
  opts = opts || {};
  const logX = document.getElementById('log-x').checked;
  const logY = document.getElementById('log-y').checked && !opts.noLogY;
  let points = 0;
  const ds = datasets.map(d => {
    points += d.data.length;
    return { label: d.label, data: d.data, borderColor: d.color, backgroundColor: d.color, borderWidth: 1.5,
      pointRadius: d.data.length > 60 ? 0 : 2, showLine: true, borderDash: d.dash || [], stepped: !!d.stepped };
  });
  entry.card.dataset.points = String(points);
  entry.empty.textContent = points ? '' : (opts.empty || 'nothing recorded yet');
  const scales = {
    x: { type: logX ? 'logarithmic' : 'linear', title: { display: true, text: opts.xTitle || axisTitle() } },
    y: { type: logY ? 'logarithmic' : 'linear', title: { display: true, text: yTitle } },
  };
  if (entry.chart && entry.chart.config.type === 'line') {
    entry.chart.data.datasets = ds;
    entry.chart.options.scales = scales;
    entry.chart.update('none');
    return;
  }
  if (entry.chart) entry.chart.destroy();
  entry.chart = new Chart(entry.canvas, {
    type: 'line',
    data: { datasets: ds },
    plugins: [whiteBackground],
    options: {
      animation: false, parsing: false, normalized: true, maintainAspectRatio: false, spanGaps: true,
      interaction: { mode: 'nearest', intersect: false },
      plugins: { decimation: { enabled: true, algorithm: 'lttb', samples: 400 },
        legend: { labels: { boxWidth: 12, font: { size: 11 } } } },
      scales,
    },
  });
}

function barChart(name, title, labels, datasets, yTitle, xTitle, stacked) {
  const entry = card(name, title);
  let points = 0;
  for (const d of datasets) points += d.data.filter(v => v).length;
  entry.card.dataset.points = String(points);
  entry.empty.textContent = points ? '' : 'nothing recorded yet';
  const logY = document.getElementById('log-y').checked && !stacked;
  const scales = { x: { stacked, title: { display: true, text: xTitle } },
    y: { stacked, type: logY ? 'logarithmic' : 'linear', title: { display: true, text: yTitle } } };
  if (entry.chart && entry.chart.config.type === 'bar') {
    entry.chart.data.labels = labels;
    entry.chart.data.datasets = datasets;
    entry.chart.options.scales = scales;
    entry.chart.update('none');
    return;
  }
  if (entry.chart) entry.chart.destroy();
  entry.chart = new Chart(entry.canvas, {
    type: 'bar', data: { labels, datasets }, plugins: [whiteBackground],
    options: { animation: false, maintainAspectRatio: false, scales,
      plugins: { legend: { labels: { boxWidth: 12, font: { size: 11 } } } } },
  });
}

function drawCharts() {
  const weight = parseFloat(document.getElementById('smoothing').value);
  const chosen = state.order.filter(id => state.selected.has(id)).map(id => state.runs.get(id));
  const many = chosen.length > 1;
  const name = r => many ? r.id.slice(r.id.lastIndexOf('/') + 1) + ' ' : '';
  const loss = [], acc = [], tput = [], bytes = [], testLoss = [];
  const axis = document.getElementById('x-axis').value;
  const byTime = axis === 'vtime' ? 'vtime' : 'time';
  for (const r of chosen) {
    const color = state.colors.get(r.id);
    let i = 0;
    for (const [unit, rows] of [...r.units].sort()) {
      const c = shade(color, i++, r.units.size);
      loss.push({ label: name(r) + unit, color: c, data: smooth(series(rows, 'loss'), weight) });
      tput.push({ label: name(r) + unit, color: c, data: smooth(series(rows, 'sps'), weight) });
    }
    i = 0;
    for (const [group, rows] of [...r.tests].sort()) {
      const c = shade(color, i++, r.tests.size);
      if (rows.some(p => p.accuracy !== null))
        acc.push({ label: name(r) + group, color: c, data: series(rows, 'accuracy') });
      testLoss.push({ label: name(r) + group, color: c, data: series(rows, 'loss') });
    }
    i = 0;
    /* bytes are counted per process, not per sample: against time */
    for (const [rank, p] of r.procs)
      bytes.push({ label: name(r) + 'rank ' + rank, color: shade(color, i++, r.procs.size),
        data: series(p.bytes, 'sent', byTime) });
  }
  const timeOnly = axis === 'samples' || axis === 'step';
  lineChart('loss', 'Train loss per group and worker', 'loss', loss);
  lineChart('accuracy', 'Test accuracy per group', 'accuracy', acc,
    { empty: 'no test pass with an accuracy yet' });
  lineChart('test-loss', 'Test loss per group', 'loss', testLoss);
  lineChart('throughput', 'Throughput per group and worker', 'samples/s', tput);
  lineChart('bytes', 'Bytes sent per process', 'bytes sent (cumulative)', bytes,
    { xTitle: timeOnly ? 'wall time (s): process lines count no samples' : undefined, empty: 'no process line yet (written every metrics_interval)' });

  /* waiting vs computing: seconds per unit over the whole run */
  const units = [], compute = [], wait = [], peer = [];
  for (const r of chosen)
    for (const [unit, rows] of r.units) {
      units.push(name(r) + unit);
      /* compute_s includes peer_wait_s (README, "Metrics"): the bars do not count it twice */
      compute.push(rows.reduce((s, p) => s + Math.max(0, p.compute - p.peer), 0));
      wait.push(rows.reduce((s, p) => s + p.wait, 0));
      peer.push(rows.reduce((s, p) => s + p.peer, 0));
    }
  barChart('waiting', 'Waiting vs computing (s, whole run)', units, [
    { label: 'computing (forward + backward)', data: compute, backgroundColor: '#2e7d32' },
    { label: 'waiting for the servers', data: wait, backgroundColor: '#c62828' },
    { label: 'waiting for the group\'s other processes', data: peer, backgroundColor: '#ef6c00' },
  ], 'seconds', 'group and worker', true);

  /* staleness: one histogram per serving process, cut where 99 % of
   * every server's updates are in, at most 16 bars (the rest summed in
   * the last one): a long thin tail would squeeze the bars that matter */
  const servers = [];
  for (const r of chosen) {
    let i = 0;
    for (const [rank, p] of r.procs)
      if (p.serves) servers.push({ label: name(r) + 'server rank ' + rank, hist: p.hist,
        color: shade(state.colors.get(r.id), i++, r.procs.size) });
  }
  let cut = 1;
  for (const sv of servers) {
    const total = sv.hist.reduce((a, n) => a + (n || 0), 0);
    let seen = 0, k = 0;
    while (k < sv.hist.length && seen < 0.99 * total) seen += sv.hist[k++] || 0;
    cut = Math.min(16, Math.max(cut, k + 1));
  }
  const longest = Math.max(1, ...servers.map(sv => sv.hist.length));
  const labels = [];
  for (let k = 0; k < cut; k++) labels.push(String(k));
  if (longest > cut || cut === 64) labels[cut - 1] = (cut - 1) + '+';   /* the server's 64th bin is 63 or more */
  const hist = servers.map(sv => {
    const data = [];
    for (let k = 0; k < cut; k++) data.push(sv.hist[k] || 0);
    for (let k = cut; k < sv.hist.length; k++) data[cut - 1] += sv.hist[k] || 0;
    return { label: sv.label, data, backgroundColor: sv.color };
  });
  barChart('staleness', 'Staleness of updates per server', labels, hist, 'updates', 'staleness (updates in between)',
    false);
}

function redraw() {
  if (!state.dirty) return;
  state.dirty = false;
  drawRunList();
  drawCluster();
  drawCharts();
}

/* ---- start -------------------------------------------------------------------- */

for (const id of ['x-axis', 'log-x', 'log-y'])
  document.getElementById(id).onchange = () => { state.dirty = true; redraw(); };
document.getElementById('smoothing').oninput = () => {
  document.getElementById('smoothing-value').textContent =
    parseFloat(document.getElementById('smoothing').value).toFixed(2);
  state.dirty = true;
};
document.getElementById('select-all').onclick = () => {
  state.chosenByUser = true; state.order.forEach(id => state.selected.add(id)); state.dirty = true;
};
document.getElementById('select-none').onclick = () => {
  state.chosenByUser = true; state.selected.clear(); state.dirty = true;
};
/* at most one redraw a second, however fast lines come */
setInterval(redraw, 1000);
loadRuns().then(redraw).catch(e => setStatus(String(e), 'down'));
