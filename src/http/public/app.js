// The token page: log in (session cookie), mint a token, list and revoke tokens.
const $ = (id) => document.getElementById(id);
const api = '/api';

function say(text) {
  $('status').textContent = text;
}

async function problem(res) {
  try {
    const body = await res.json();
    return body.detail || body.title || `HTTP ${res.status}`;
  } catch {
    return `HTTP ${res.status}`;
  }
}

function form(data) {
  return { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(data).toString() };
}

async function showTokens() {
  const res = await fetch(`${api}/session/tokens`);
  if (!res.ok) return say(await problem(res));
  const rows = $('token-rows');
  rows.replaceChildren();
  for (const t of await res.json()) {
    const tr = document.createElement('tr');
    const state = t.active ? 'active' : t.revokedAt ? 'revoked' : 'expired';
    for (const text of [String(t.id), t.createdAt, t.expiresAt ?? 'never', state]) {
      const td = document.createElement('td');
      td.textContent = text;
      tr.append(td);
    }
    const td = document.createElement('td');
    if (t.active) {
      const b = document.createElement('button');
      b.type = 'button';
      b.textContent = `Revoke token ${t.id}`;
      b.addEventListener('click', async () => {
        const r = await fetch(`${api}/session/tokens/${t.id}`, { method: 'DELETE' });
        say(r.ok ? `Token ${t.id} revoked.` : await problem(r));
        await showTokens();
      });
      td.append(b);
    }
    tr.append(td);
    rows.append(tr);
  }
}

function loggedIn(user) {
  $('who').textContent = user.email;
  $('login').hidden = true;
  $('tokens').hidden = false;
  return showTokens();
}

$('login-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const res = await fetch(`${api}/session`, form({ email: $('email').value, password: $('password').value }));
  if (!res.ok) return say(await problem(res));
  say('');
  await loggedIn(await res.json());
});

$('mint-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const local = $('expiration').value;
  const data = local ? { expiration: new Date(local).toISOString() } : {};
  const res = await fetch(`${api}/session/token`, form(data));
  if (!res.ok) return say(await problem(res));
  $('token-value').textContent = await res.text();
  $('new-token').hidden = false;
  say('Token created.');
  await showTokens();
});

$('logout').addEventListener('click', async () => {
  await fetch(`${api}/session`, { method: 'DELETE' });
  $('tokens').hidden = true;
  $('new-token').hidden = true;
  $('login').hidden = false;
  say('Logged out.');
});

const res = await fetch(`${api}/session`);
if (res.ok) await loggedIn(await res.json());
