/**
 * The web view in a real browser (docs/serve.md, "Web view"): Debian's chromium driven by
 * puppeteer-core, while another process (a Python client of the service) takes and
 * releases locks, in bursts too (the page follows `/v1/events?mode=state`). A screenshot is
 * kept in test-results/serve-view.png.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { ensureChromium } from '../../scripts/servers/chromium.js';
import { fileUrl, startService, type Service } from './service.js';

const T = { timeout: 120_000 };
const DRIVER = fileURLToPath(new URL('./driver.py', import.meta.url));

/** A Python client process: one command a line, one JSON answer a line. */
interface Driver {
  send(command: string): Promise<Record<string, unknown>>;
  stop(): void;
}

function driver(base: string): Driver {
  const child: ChildProcessWithoutNullStreams = spawn('python3', [DRIVER, base]);
  const lines = createInterface({ input: child.stdout });
  const waiting: ((line: string) => void)[] = [];
  lines.on('line', (line) => waiting.shift()?.(line));
  return {
    send: (command) =>
      new Promise((resolve) => {
        waiting.push((line) => resolve(JSON.parse(line) as Record<string, unknown>));
        child.stdin.write(`${command}\n`);
      }),
    stop: () => child.kill(),
  };
}

let service: Service;
let browser: Browser;
let page: Page;
const drivers: Driver[] = [];
before(async () => {
  service = await startService(fileUrl(), { watchEveryMs: 200 });
  browser = await puppeteer.launch({
    executablePath: await ensureChromium(),
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  page = await browser.newPage();
  await page.setViewport({ width: 1100, height: 500 });
});
after(async () => {
  for (const d of drivers) d.stop();
  await browser?.close();
  await service.close();
});

/** The text of each cell of the row of `lockId` (class → text), or null without such a row. */
async function row(lockId: string): Promise<Record<string, string> | null> {
  // A string: the test is type-checked without the DOM library.
  const json = await page.evaluate(`(() => {
    const tr = [...document.querySelectorAll('#locks tbody tr')].find((r) => r.dataset.lockId === ${JSON.stringify(lockId)});
    return tr ? JSON.stringify(Object.fromEntries([...tr.children].map((td) => [td.className, td.textContent]))) : 'null';
  })()`);
  return JSON.parse(String(json)) as Record<string, string> | null;
}

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const end = Date.now() + 20_000;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('the view shows holder, token, countdown and waiters live while another process locks', T, async () => {
  const [one, two] = [driver(service.base), driver(service.base)];
  drivers.push(one, two);
  await page.goto(`${service.base}/?prefix=web/&pageSize=5`);
  await until('live', async () => (await page.$eval('#status', (e) => e.textContent)) === 'live');
  const alice = (await one.send('session alice 30000')).id as string;
  const first = await one.send(`acquire web/a ${alice} 0`);
  await until('alice holds web/a', async () => (await row('web/a'))?.holder === 'alice');
  assert.equal((await row('web/a'))?.token, first.token);
  assert.equal(await page.$eval('#count', (e) => e.textContent), '1 lock');
  const leaseBefore = (await row('web/a'))?.lease;
  await until('the lease counts down', async () => (await row('web/a'))?.lease !== leaseBefore);
  const bob = (await two.send('session bob 30000')).id as string;
  const bobWaits = two.send(`acquire web/a ${bob} 30000 fair`);
  await until('bob waits', async () => (await row('web/a'))?.waiters?.startsWith('bob') === true);
  mkdirSync('test-results', { recursive: true });
  await page.screenshot({ path: 'test-results/serve-view.png' });
  await one.send(`release web/a ${alice} ${String(first.token)}`);
  const second = await bobWaits;
  assert.ok(BigInt(second.token as string) > BigInt(first.token as string));
  await until('bob holds web/a', async () => (await row('web/a'))?.holder === 'bob');
  assert.equal((await row('web/a'))?.token, second.token);
  assert.equal((await row('web/a'))?.waiters, '-');
  await two.send(`release web/a ${bob} ${String(second.token)}`);
  await until('web/a gone', async () => (await row('web/a')) === null);
});

test('after a burst of hand-offs the view shows the final holder and token (state stream)', T, async () => {
  const [one, two] = [driver(service.base), driver(service.base)];
  drivers.push(one, two);
  await page.goto(`${service.base}/?prefix=web/&pageSize=5`);
  await until('live', async () => (await page.$eval('#status', (e) => e.textContent)) === 'live');
  const [erin, fred] = [(await one.send('session erin 30000')).id as string, (await two.send('session fred 30000')).id as string];
  let last: Record<string, unknown> = {};
  for (let i = 0; i < 30; i += 1) {
    const [who, s] = i % 2 === 0 ? [one, erin] : [two, fred];
    last = await who.send(`acquire web/burst ${s} 0`);
    if (i < 29) await who.send(`release web/burst ${s} ${String(last.token)}`);
  }
  await until('fred holds web/burst with the last token', async () => {
    const r = await row('web/burst');
    return r?.holder === 'fred' && r.token === last.token;
  });
  await two.send(`release web/burst ${fred} ${String(last.token)}`);
  await until('web/burst gone', async () => (await row('web/burst')) === null);
});

test('filter and paging', T, async () => {
  const one = driver(service.base);
  drivers.push(one);
  const s = (await one.send('session pager 30000')).id as string;
  for (let i = 0; i < 7; i += 1) await one.send(`acquire web/p${i} ${s} 0`);
  await until('7 locks', async () => (await page.$eval('#count', (e) => e.textContent)) === '7 locks');
  const rows = (): Promise<number> => page.$$eval('#locks tbody tr', (r) => r.length);
  assert.equal(await rows(), 5);
  assert.equal(await page.$eval('#page', (e) => e.textContent), 'page 1 of 2');
  await page.click('#next');
  assert.equal(await rows(), 2);
  await page.type('#filter', 'p3');
  assert.equal(await rows(), 1);
  assert.ok((await row('web/p3')) !== null);
});

/** The rows of a table of the lock's page, as lists of cell texts. */
async function tableRows(id: string): Promise<string[][]> {
  const json = await page.evaluate(
    `JSON.stringify([...document.querySelectorAll('#${id} tbody tr')].map((r) => [...r.children].map((td) => td.textContent)))`,
  );
  return JSON.parse(String(json)) as string[][];
}

test("a lock's page: holder, waiters in order and its recent hand-offs, live", T, async () => {
  const [one, two] = [driver(service.base), driver(service.base)];
  drivers.push(one, two);
  await page.goto(`${service.base}/?prefix=web/#/locks/${encodeURIComponent('web/h')}`);
  await until('the lock page', async () => (await page.$eval('#lv-since', (e) => e.textContent)) !== '');
  assert.equal(await page.$eval('#lv-id', (e) => e.textContent), 'web/h');
  assert.equal(await page.$eval('#listview', (e) => (e as unknown as { hidden: boolean }).hidden), true);
  assert.equal((await tableRows('lv-holders'))[0]?.[0], 'free');
  const carol = (await one.send('session carol 30000')).id as string;
  const dave = (await two.send('session dave 30000')).id as string;
  const first = await one.send(`acquire web/h ${carol} 0`);
  await until('carol holds', async () => (await tableRows('lv-holders'))[0]?.[0] === 'carol');
  assert.equal((await tableRows('lv-holders'))[0]?.[1], first.token);
  const daveWaits = two.send(`acquire web/h ${dave} 30000 fair`);
  await until('dave waits', async () => (await page.$eval('#lv-queue', (e) => e.textContent))?.startsWith('dave') === true);
  await one.send(`release web/h ${carol} ${String(first.token)}`);
  const second = await daveWaits;
  await two.send(`release web/h ${dave} ${String(second.token)}`);
  const has = (rows: string[][], event: string, holder: string, token: unknown): boolean =>
    rows.some((r) => r[1] === event && r[2] === holder && r[3] === token);
  await until('the hand-offs', async () => {
    const rows = await tableRows('lv-handoffs');
    return (
      has(rows, 'released', 'carol', first.token) &&
      has(rows, 'acquired', 'dave', second.token) &&
      has(rows, 'released', 'dave', second.token)
    );
  });
  const rows = await tableRows('lv-handoffs');
  assert.deepEqual(rows[0]?.slice(1), ['released', 'dave', second.token], 'newest first');
  const at = (event: string, holder: string): number => rows.findIndex((r) => r[1] === event && r[2] === holder);
  assert.ok(at('released', 'carol') > at('acquired', 'dave'), "carol's release shows before dave's acquire");
  assert.match(rows[0]?.[0] ?? '', /^\d\d:\d\d:\d\d\.\d{3}$/);
  await page.screenshot({ path: 'test-results/serve-lock-page.png' });
  await page.click('#lockview a');
  await until(
    'back to the list',
    async () => (await page.$eval('#lockview', (e) => (e as unknown as { hidden: boolean }).hidden)) === true,
  );
});

test('10,000 locks: the list loads every page, paging and the filter stay usable', T, async (t) => {
  const big = await startService(`memory://serve-view-${process.pid}`, { watchEveryMs: 1_000 });
  try {
    const ids = Array.from({ length: 10_000 }, (_, i) => `lk/${String(i).padStart(5, '0')}`);
    for (let i = 0; i < ids.length; i += 500) {
      await Promise.all(ids.slice(i, i + 500).map((id) => big.locker.tryLock(id, { ttlMs: 600_000 })));
    }
    const started = performance.now();
    await page.goto(`${big.base}/?pageSize=50`);
    await until('10000 locks', async () => (await page.$eval('#count', (e) => e.textContent)) === '10000 locks');
    const loadMs = performance.now() - started;
    assert.equal(await page.$eval('#page', (e) => e.textContent), 'page 1 of 200');
    assert.equal(await page.$$eval('#locks tbody tr', (r) => r.length), 50);
    await page.click('#next');
    assert.equal(await page.$eval('#page', (e) => e.textContent), 'page 2 of 200');
    assert.equal((await row('lk/00050'))?.lock, 'lk/00050');
    // One filter keystroke's render, measured in the page (a figure, not an assertion).
    const filterMs = Number(
      await page.evaluate(`(() => {
        const f = document.getElementById('filter'), t0 = performance.now();
        f.value = 'lk/0432'; f.dispatchEvent(new Event('input'));
        return performance.now() - t0;
      })()`),
    );
    assert.equal(await page.$$eval('#locks tbody tr', (r) => r.length), 10);
    assert.equal(await page.$eval('#count', (e) => e.textContent), '10 locks');
    t.diagnostic(`10,000 locks: first full render ${Math.round(loadMs)} ms, one filter keystroke ${filterMs.toFixed(1)} ms`);
  } finally {
    await page.goto('about:blank');
    await big.close();
  }
});
