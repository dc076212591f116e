/**
 * The web view at `/` (docs/serve.md, "Web view"): one static page, inline script, no build
 * step and nothing fetched but this service's own API. It follows `GET /v1/events?mode=state`:
 * the state of every lock under a prefix first, then each changed lock's latest state at most
 * a few times a second (events.ts), so a view costs the service one write per tick whatever
 * the rate of changes; the lease left counts down locally. `#/locks/<id>` is a lock's page:
 * holders, waiters in order and its recent hand-offs (history.ts), re-read on its changes and
 * every second. The page carries no data itself: with tokens it asks for one and sends it as
 * a header (fetch, not EventSource, which cannot).
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
a{color:#05c}
h2{font-size:1.15em;margin:.2em 0 .5em}h3{font-size:1em;margin:1em 0 .3em}
#lv-queue{margin:.2em 0}
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
<div id="listview">
<table id="locks"><thead><tr><th>lock</th><th>kind</th><th>holder</th><th>held for</th><th>lease left</th><th>token</th><th>waiters</th></tr></thead>
<tbody></tbody></table>
<div id="pager"><button id="prev">&larr; prev</button> <span id="page"></span> <button id="next">next &rarr;</button></div>
</div>
<div id="lockview" hidden>
<p><a href="#">&larr; all locks</a></p>
<h2 id="lv-id"></h2>
<table id="lv-holders"><thead><tr><th>holder</th><th>token</th><th>held for</th><th>lease left</th></tr></thead><tbody></tbody></table>
<h3>waiters</h3><ol id="lv-queue"></ol>
<h3>recent hand-offs <span id="lv-since" class="muted"></span></h3>
<table id="lv-handoffs"><thead><tr><th>time</th><th>event</th><th>holder</th><th>token</th></tr></thead><tbody></tbody></table>
<p id="lv-error" class="down"></p>
</div>
<script>
(() => {
  const params = new URLSearchParams(location.search);
  const pageSize = Math.max(1, Math.min(1000, Number(params.get('pageSize')) || 50));
  const $ = (id) => document.getElementById(id);
  const locks = new Map();
  let page = 0, stream = null;
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
      const link = document.createElement('a');
      link.href = '#/locks/' + encodeURIComponent(l.lockId);
      link.textContent = l.lockId;
      cell(tr, 'lock', '').appendChild(link);
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
    $('count').textContent = rows.length + (rows.length === 1 ? ' lock' : ' locks');
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
  // Many changes at once (10,000 locks, 64 contenders) make one render, not one each.
  let pending = null;
  function later() { if (!pending) pending = setTimeout(() => { pending = null; render(); }, 100); }
  // A lock's state, as the stream sends it (the latest, at most a few times a second).
  function apply(l) {
    if (l.holders.length > 0 || l.waiters > 0) locks.set(l.lockId, l); else locks.delete(l.lockId);
    later();
    if (l.lockId === current()) showLock();
  }
  // The stream in state mode starts with every lock under the prefix, then sends each lock
  // that changed; after a resync (this page read too slowly) the whole state comes again.
  async function follow(prefix, signal) {
    const r = await fetch('/v1/events?mode=state&prefix=' + encodeURIComponent(prefix), { headers: headers(), signal });
    if (!r.ok || !r.body) throw new Error(String(r.status));
    locks.clear(); later();
    $('status').textContent = 'live'; $('status').className = 'live';
    const reader = r.body.getReader(), dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error('the stream ended');
      buf += dec.decode(value, { stream: true });
      let at = 0, end;
      while ((end = buf.indexOf('\\n\\n', at)) >= 0) {
        const block = buf.slice(at, end); at = end + 2;
        const name = /^event: (.*)$/m.exec(block), data = /^data: (.*)$/m.exec(block);
        if (!name || !data) continue;
        if (name[1] === 'state') apply(JSON.parse(data[1]));
        else if (name[1] === 'resync') { locks.clear(); later(); }
        else if (name[1] === 'error') throw new Error(JSON.parse(data[1]).message);
      }
      buf = buf.slice(at);
    }
  }
  async function start() {
    if (stream) stream.abort();
    stream = new AbortController();
    const signal = stream.signal, prefix = $('prefix').value;
    sessionStorage.setItem('locksmith-token', $('token').value);
    while (!signal.aborted) {
      try { await follow(prefix, signal); }
      catch (e) { if (signal.aborted) return; $('status').textContent = 'disconnected: ' + e.message; $('status').className = 'down'; }
      await new Promise((r) => setTimeout(r, 2000));
    }
  }
  const current = () => (location.hash.startsWith('#/locks/') ? decodeURIComponent(location.hash.slice(8)) : null);
  const pad = (n, w) => String(n).padStart(w || 2, '0');
  const clock = (t) => { const d = new Date(t); return pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds()) + '.' + pad(d.getMilliseconds(), 3); };
  const row = (cells) => { const tr = document.createElement('tr'); for (const [cls, text] of cells) cell(tr, cls, text); return tr; };
  async function showLock() {
    const id = current();
    $('listview').hidden = id !== null; $('lockview').hidden = id === null;
    if (id === null) return;
    $('lv-id').textContent = id;
    try {
      const path = '/v1/locks/' + encodeURIComponent(id);
      const [info, hist] = await Promise.all([getJson(path), getJson(path + '/history')]);
      if (current() === id) renderLock(info, hist);
      $('lv-error').textContent = '';
    } catch (e) { $('lv-error').textContent = 'could not read the lock: ' + e.message; }
  }
  function renderLock(info, hist) {
    const holders = document.createElement('tbody');
    for (const h of info.holders) {
      const tr = row([['holder', who(h)], ['token', h.token], ['held', '-'], ['lease', '-']]);
      if (h.acquiredAt !== undefined) tr.children[2].dataset.since = String(h.acquiredAt);
      if (h.leaseEndsAt !== undefined) tr.children[3].dataset.ends = String(h.leaseEndsAt);
      holders.appendChild(tr);
    }
    if (!info.holders.length) holders.appendChild(row([['holder', 'free'], ['token', info.lastToken !== undefined ? 'last ' + info.lastToken : '-'], ['held', '-'], ['lease', '-']]));
    $('lv-holders').replaceChild(holders, $('lv-holders').tBodies[0]);
    const now = Date.now();
    $('lv-queue').replaceChildren(...(info.queue || []).map((w) => { const li = document.createElement('li'); li.textContent = who(w) + (w.since !== undefined ? ' (waiting ' + span(now - w.since) + ')' : ''); return li; }));
    if (!(info.queue || []).length && info.waiters) $('lv-queue').textContent = info.waiters + ' waiting';
    const rows = document.createElement('tbody');
    for (const e of [...hist.handoffs].reverse()) rows.appendChild(row([['time', clock(e.at)], ['event', e.type], ['holder', e.holder], ['token', e.token || '-']]));
    $('lv-handoffs').replaceChild(rows, $('lv-handoffs').tBodies[0]);
    $('lv-since').textContent = '(seen by this replica since ' + clock(hist.since) + '; each replica keeps its own)';
    tick();
  }
  window.onhashchange = showLock;
  setInterval(() => { if (current() !== null) showLock(); }, 1000);
  showLock();
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
