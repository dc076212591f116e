/**
 * The web view in a real browser (docs/serve.md, "Web view"): Debian's chromium driven by
 * puppeteer-core, while another process (a Python client of the service) takes and
 * releases locks. A screenshot is kept in test-results/serve-view.png.
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
