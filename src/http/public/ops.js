// The operations page: reads GET /api/metrics with the administrator's session every 5 s and
// shows its figures. Nothing here is kept but the page itself.
const $ = (id) => document.getElementById(id);
const REFRESH_MS = 5000;

function say(text) {
  $('status').textContent = text;
}

/** the exposition's samples: [{ name, labels, value }] */
function parse(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const [, k, v] of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[k] = v;
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

function sum(samples, name, match = () => true) {
  return samples.filter((s) => s.name === name && match(s.labels)).reduce((n, s) => n + s.value, 0);
}

const has = (samples, name) => samples.some((s) => s.name === name);
const count = (n) => Math.round(n).toLocaleString('en');
const seconds = (total, n) => (n > 0 ? `${((total / n) * 1000).toFixed(1)} ms` : '—');

function show(samples) {
  $('requests-total').textContent = count(sum(samples, 'cad_http_requests_total'));
  $('requests-5xx').textContent = count(sum(samples, 'cad_http_requests_total', (l) => l.status >= '500'));
  $('sockets-device').textContent = count(sum(samples, 'cad_sockets_online', (l) => l.kind === 'device'));
  $('sockets-user').textContent = count(sum(samples, 'cad_sockets_online', (l) => l.kind === 'user'));
  $('pushes-pending').textContent = has(samples, 'cad_pushes_pending') ? count(sum(samples, 'cad_pushes_pending')) : 'could not be read';
  const pushes = (state) => count(sum(samples, 'cad_pushes_total', (l) => l.state === state));
  $('pushes-settled').textContent = `${pushes('delivered')} / ${pushes('expired')} / ${pushes('superseded')}`;
  const alerts = sum(samples, 'cad_alert_latency_seconds_count');
  $('alert-latency').textContent = `${seconds(sum(samples, 'cad_alert_latency_seconds_sum'), alerts)}, ${count(alerts)}`;
  const groups = sum(samples, 'cad_write_group_size_count');
  $('write-groups').textContent = groups > 0 ? `${(sum(samples, 'cad_write_group_size_sum') / groups).toFixed(1)}, ${count(groups)}` : '—';
  const errors = samples.filter((s) => s.name === 'cad_database_errors_total' && s.value > 0);
  $('database-errors').textContent = errors.length ? errors.map((s) => `${s.labels.source} ${count(s.value)}`).join(', ') : 'none';
  const webhooks = samples.filter((s) => s.name === 'cad_webhook_deliveries');
  $('webhook-deliveries').textContent = webhooks.length ? webhooks.map((s) => `${s.labels.state} ${count(s.value)}`).join(', ') : '—';

  const ops = new Map();
  for (const s of samples) {
    if (s.name !== 'cad_http_requests_total') continue;
    const op = ops.get(s.labels.operation) ?? { statuses: [], sum: 0, n: 0 };
    op.statuses.push(`${s.labels.status}: ${count(s.value)}`);
    ops.set(s.labels.operation, op);
  }
  for (const s of samples) {
    const op = ops.get(s.labels.operation);
    if (!op) continue;
    if (s.name === 'cad_http_request_duration_seconds_sum') op.sum = s.value;
    if (s.name === 'cad_http_request_duration_seconds_count') op.n = s.value;
  }
  const rows = $('operation-rows');
  rows.replaceChildren();
  for (const [name, op] of [...ops].sort(([a], [b]) => a.localeCompare(b))) {
    const tr = document.createElement('tr');
    for (const text of [name, op.statuses.join(', '), seconds(op.sum, op.n)]) {
      const td = document.createElement('td');
      td.textContent = text;
      tr.append(td);
    }
    rows.append(tr);
  }
  $('updated').textContent = new Date().toLocaleTimeString('en-GB');
}

let timer = null;

async function refresh() {
  let res;
  try {
    res = await fetch('/api/metrics', { cache: 'no-store' });
  } catch {
    say('The service does not answer; trying again.');
    return;
  }
  if (res.status === 401) {
    clearInterval(timer);
    timer = null;
    $('figures').hidden = true;
    $('login').hidden = false;
    return;
  }
  if (res.status === 403) {
    clearInterval(timer);
    timer = null;
    $('figures').hidden = true;
    $('login').hidden = false;
    say('Refused: only administrators see the operations page.');
    return;
  }
  if (!res.ok) {
    say(`The metrics could not be read (HTTP ${res.status}); trying again.`);
    return;
  }
  show(parse(await res.text()));
  $('login').hidden = true;
  $('figures').hidden = false;
  if (!$('status').textContent.startsWith('Refused')) say('');
  timer ??= setInterval(refresh, REFRESH_MS);
}

$('login-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const body = new URLSearchParams({ email: $('email').value, password: $('password').value }).toString();
  const res = await fetch('/api/session', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body });
  if (!res.ok) {
    say(res.status === 401 ? 'Wrong email or password.' : `Login failed (HTTP ${res.status}).`);
    return;
  }
  say('');
  await refresh();
});

await refresh();
