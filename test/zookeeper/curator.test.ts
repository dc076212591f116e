/**
 * Interop with Apache Curator itself: a Java process using Curator's InterProcessMutex,
 * InterProcessReadWriteLock and InterProcessSemaphoreV2 (Debian's libcurator-*-java) and a
 * locksmith client contend for the same paths on one ZooKeeper server, and exclude each
 * other. No quorum is needed here, so a single standalone node serves.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { createLocker, type Locker } from '../../src/index.js';
import { createZooKeeperBackend } from '../../src/backends/zookeeper/index.js';
import { installCurator, startZooKeeper, type RunningZooKeeper } from '../../scripts/servers/zookeeper.js';

const T = { timeout: 180_000 };
const CHROOT = '/curator-interop';
const PEER = fileURLToPath(new URL('./CuratorPeer.java', import.meta.url));

let server: RunningZooKeeper;
let classpath = '';
const peers: CuratorPeer[] = [];
const lockers: Locker[] = [];

before(async () => {
  classpath = await installCurator();
  server = await startZooKeeper({ nodes: 1 });
});

after(async () => {
  for (const p of peers.splice(0)) p.kill();
  await Promise.allSettled(lockers.splice(0).map((l) => l.close()));
  await server.stop();
});

/** One Java Curator client, driven over stdin; each command answers one line. */
class CuratorPeer {
  readonly #proc: ChildProcessWithoutNullStreams;
  readonly #lines: string[] = [];
  readonly #waiters: ((line: string) => void)[] = [];

  constructor(path: string, kind: string) {
    this.#proc = spawn('java', ['-Xmx128m', '-cp', classpath, PEER, server.connectString, path, kind], { stdio: 'pipe' });
    createInterface({ input: this.#proc.stdout }).on('line', (raw) => {
      const line = raw.trim();
      const w = this.#waiters.shift();
      if (w) w(line);
      else this.#lines.push(line);
    });
    this.#proc.stderr.resume();
    peers.push(this);
  }

  next(): Promise<string> {
    const line = this.#lines.shift();
    if (line !== undefined) return Promise.resolve(line);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  async ready(): Promise<void> {
    assert.equal(await this.next(), 'READY');
  }

  async send(cmd: string): Promise<string> {
    this.#proc.stdin.write(`${cmd}\n`);
    return this.next();
  }

  kill(): void {
    this.#proc.kill('SIGKILL');
  }
}

function client(): Locker {
  const l = createLocker(createZooKeeperBackend(`zookeeper://${server.connectString}${CHROOT}?sessionTimeoutMs=10000`));
  lockers.push(l);
  return l;
}

const id = (label: string): string => `${label}-${randomBytes(5).toString('hex')}`;

const queuedOn = (locker: Locker): Promise<void> => new Promise((resolve) => locker.once('waiting', () => resolve()));

describe('zookeeper: Apache Curator and locksmith on the same path', () => {
  test('InterProcessMutex and a locksmith lock exclude each other, in both directions', T, async () => {
    const lockId = id('mutex');
    const java = new CuratorPeer(`${CHROOT}/${lockId}`, 'mutex');
    await java.ready();
    assert.equal(await java.send('acquire 30000'), 'ACQUIRED');

    const ts = client();
    assert.equal(await ts.tryLock(lockId), null, 'Curator holds: locksmith cannot take it');
    const queued = queuedOn(ts);
    const pending = ts.lock(lockId, { timeoutMs: 60_000 });
    await queued;
    assert.equal(await java.send('release'), 'RELEASED');
    const lock = await pending;

    assert.equal(await java.send('acquire 500'), 'TIMEOUT', 'locksmith holds: Curator cannot take it');
    await lock.release();
    assert.equal(await java.send('acquire 30000'), 'ACQUIRED');
    assert.equal(await java.send('release'), 'RELEASED');
  });

  test('InterProcessReadWriteLock and locksmith read-write locks share reads and exclude writes', T, async () => {
    const lockId = id('rw');
    const javaRead = new CuratorPeer(`${CHROOT}/${lockId}`, 'read');
    const javaWrite = new CuratorPeer(`${CHROOT}/${lockId}`, 'write');
    await Promise.all([javaRead.ready(), javaWrite.ready()]);
    const ts = client();

    const read = await ts.readWriteLock(lockId).read({ timeoutMs: 30_000 });
    assert.equal(await javaRead.send('acquire 30000'), 'ACQUIRED', 'a Curator reader shares with a locksmith reader');
    assert.equal(await javaWrite.send('acquire 500'), 'TIMEOUT', 'a Curator writer waits for the readers');
    assert.equal(await client().readWriteLock(lockId).tryWrite(), null, 'so does a locksmith writer');
    await read.release();
    assert.equal(await javaRead.send('release'), 'RELEASED');

    assert.equal(await javaWrite.send('acquire 30000'), 'ACQUIRED');
    assert.equal(await client().readWriteLock(lockId).tryRead(), null, 'a Curator writer excludes locksmith readers');
    assert.equal(await javaWrite.send('release'), 'RELEASED');
    const again = await ts.readWriteLock(lockId).tryRead();
    assert.ok(again);
    await again.release();
  });

  test('InterProcessSemaphoreV2 and a locksmith semaphore count the same leases', T, async () => {
    const lockId = id('sem');
    const java = new CuratorPeer(`${CHROOT}/${lockId}`, 'semaphore:2');
    await java.ready();
    assert.equal(await java.send('acquire 30000'), 'ACQUIRED');
    const sem = client().semaphore(lockId, { permits: 2 });
    const one = await sem.tryAcquire();
    assert.ok(one, 'one of two permits is still free');
    assert.equal(await client().semaphore(lockId, { permits: 2 }).tryAcquire(), null, 'both permits are taken');
    assert.equal(await java.send('release'), 'RELEASED');
    const two = await client().semaphore(lockId, { permits: 2 }).tryAcquire();
    assert.ok(two, 'the Curator lease came back');
    assert.equal(await java.send('acquire 500'), 'TIMEOUT', 'Curator sees both permits taken by locksmith');
    await one.release();
    await two.release();
  });
});
