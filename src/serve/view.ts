/**
 * The web view at `/` (docs/serve.md, "Web view"): one static page, inline script, no build
 * step and nothing fetched but this service's own API. It lists every lock under a prefix
 * (all pages of `GET /v1/locks`), then follows `GET /v1/events` and re-reads each lock that
 * changed; the lease left counts down locally. The page carries no data itself: with tokens
 * it asks for one and sends it as a header (fetch, not EventSource, which cannot).
 */

/** The page. Every value from the service is put in the DOM as text, never as HTML. */
export const VIEW_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>locksmith</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em;margin:0 0 .6em}
#bar{display:flex;gap:.6em;align-items:center;flex-wrap:wrap;margin-bottom:.8em}
input{font:inherit;padding:.25em .4em}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:.3em .6em;border-bottom:1px solid #ddd;vertical-align:top}
th{background:#f3f3f3}
td.token,td.lease,td.held{font-variant-numeric:tabular-nums;white-space:nowrap}
#status.live{color:#080}#status.down{color:#b00}
.muted{color:#888}
</style></head>
<body>
<h1>locksmith locks</h1>
<div id="bar">
<label>prefix <input id="prefix" size="20"></label>
<label>filter <input id="filter" size="20" placeholder="part of a lock id or holder"></label>
<label>token <input id="token" type="password" size="16" autocomplete="off"></label>
<button id="apply">apply</button>
<span id="status">connecting</span>
<span id="count"></span>
</div>
<table id="locks"><thead><tr><th>lock</th><th>kind</th><th>holder</th><th>held for</th><th>lease left</th><th>token</th><th>waiters</th></tr></thead>
<tbody></tbody></table>
<div id="pager"><button id="prev">&larr; prev</button> <span id="page"></span> <button id="next">next &rarr;</button></div>
<script>
(() => {
  const params = new URLSearchParams(location.search);
  const pageSize = Math.max(1, Math.min(1000, Number(params.get('pageSize')) || 50));
  const $ = (id) => document.getElementById(id);
  const locks = new Map();
  let page = 0, stream = null, rereads = new Map();
  $('prefix').value = params.get('prefix') || '';
  $('token').value = sessionStorage.getItem('locksmith-token') || '';
  const headers = () => { const t = $('token').value; return t ? { authorization: 'Bearer ' + t } : {}; };
  const span = (ms) => {
    if (ms === undefined || !isFinite(ms)) return '-';
    const v = Math.max(0, ms);
    if (v < 1000) return Math.round(v) + 'ms';
    if (v < 60000) return (v / 1000).toFixed(1) + 's';
    const s = Math.floor(v / 1000);
    if (s < 3600) return Math.floor(s / 60) + 'm' + String(s % 60).padStart(2, '0') + 's';
    return Math.floor(s / 3600) + 'h' + String(Math.floor((s % 3600) / 60)).padStart(2, '0') + 'm';
  };
  const who = (x) => {
    const i = x && x.identity;
    if (!i) return x && x.ownerId ? x.ownerId : '?';
    return i.pid === 0 ? i.name : i.name + ' ' + i.pid + '@' + i.host;
  };
  const cell = (tr, cls, text) => { const td = document.createElement('td'); td.className = cls; td.textContent = text; tr.appendChild(td); return td; };
  function visible() {
    const f = $('filter').value.trim().toLowerCase();
    const all = [...locks.values()].filter((l) => l.holders.length > 0 || l.waiters > 0);
    const shown = f ? all.filter((l) => l.lockId.toLowerCase().includes(f) || l.holders.some((h) => who(h).toLowerCase().includes(f))) : all;
    return shown.sort((a, b) => (a.lockId < b.lockId ? -1 : a.lockId > b.lockId ? 1 : 0));
  }
  function render() {
    const rows = visible();
    const pages = Math.max(1, Math.ceil(rows.length / pageSize));
    page = Math.min(page, pages - 1);
    const now = Date.now();
    const body = document.createElement('tbody');
    for (const l of rows.slice(page * pageSize, (page + 1) * pageSize)) {
      const tr = document.createElement('tr');
      tr.dataset.lockId = l.lockId;
      const h = l.holders;
      cell(tr, 'lock', l.lockId);
      cell(tr, 'kind', l.kind);
      cell(tr, 'holder', h.length ? h.map(who).join(', ') : '-');
      const held = cell(tr, 'held', '-');
      if (h.length && h[0].acquiredAt !== undefined) held.dataset.since = String(h[0].acquiredAt);
      const lease = cell(tr, 'lease', '-');
      if (h.length && h[0].leaseEndsAt !== undefined) lease.dataset.ends = String(h[0].leaseEndsAt);
      cell(tr, 'token', h.length ? h.map((x) => x.token).join(', ') : '-');
      cell(tr, 'waiters', (l.queue || []).map((w) => who(w) + (w.since !== undefined ? ' (' + span(now - w.since) + ')' : '')).join(' \\u2192 ') || (l.waiters ? String(l.waiters) : '-'));
      body.appendChild(tr);
    }
    $('locks').replaceChild(body, $('locks').tBodies[0]);
    $('page').textContent = 'page ' + (page + 1) + ' of ' + pages;
    $('count').textContent = rows.length + ' locks';
    tick();
  }
  function tick() {
    const now = Date.now();
    for (const td of document.querySelectorAll('td.lease[data-ends]')) td.textContent = span(Number(td.dataset.ends) - now);
    for (const td of document.querySelectorAll('td.held[data-since]')) td.textContent = span(now - Number(td.dataset.since));
  }
  async function getJson(path) {
    const r = await fetch(path, { headers: headers() });
    if (!r.ok) throw new Error(r.status + ' ' + (await r.text()));
    return r.json();
  }
  async function loadAll(prefix) {
    locks.clear();
    let cursor;
    do {
      const q = new URLSearchParams({ prefix, limit: '1000' });
      if (cursor) q.set('cursor', cursor);
      const p = await getJson('/v1/locks?' + q);
      for (const l of p.locks) locks.set(l.lockId, l);
      cursor = p.cursor;
    } while (cursor);
    render();
  }
  function reread(lockId) {
    if (rereads.has(lockId)) return;
    rereads.set(lockId, setTimeout(async () => {
      rereads.delete(lockId);
      try { locks.set(lockId, await getJson('/v1/locks/' + encodeURIComponent(lockId))); } catch (e) { return; }
      render();
    }, 50));
  }
  async function follow(prefix, signal) {
    const r = await fetch('/v1/events?prefix=' + encodeURIComponent(prefix), { headers: headers(), signal });
    if (!r.ok || !r.body) throw new Error(String(r.status));
    $('status').textContent = 'live'; $('status').className = 'live';
    const reader = r.body.getReader(), dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let end;
      while ((end = buf.indexOf('\\n\\n')) >= 0) {
        const block = buf.slice(0, end); buf = buf.slice(end + 2);
        const data = /^data: (.*)$/m.exec(block);
        if (data) reread(JSON.parse(data[1]).lockId);
      }
    }
  }
  async function start() {
    if (stream) stream.abort();
    stream = new AbortController();
    const signal = stream.signal, prefix = $('prefix').value;
    sessionStorage.setItem('locksmith-token', $('token').value);
    while (!signal.aborted) {
      try { await loadAll(prefix); await follow(prefix, signal); }
      catch (e) { if (signal.aborted) return; $('status').textContent = 'disconnected: ' + e.message; $('status').className = 'down'; }
      await new Promise((r) => setTimeout(r, 2000));
    }
  }
  $('apply').onclick = () => { page = 0; start(); };
  $('filter').oninput = () => { page = 0; render(); };
  $('prev').onclick = () => { page = Math.max(0, page - 1); render(); };
  $('next').onclick = () => { page += 1; render(); };
  setInterval(tick, 250);
  start();
})();
</script>
</body></html>
`;
