import { createLocker } from './src/index.js';
const port = Number(process.argv[3]);
const scheme = process.argv[2] ?? 'redis';
const url = `${scheme}://127.0.0.1:${port}`;
const l = createLocker(url, { connectTimeoutMs: 60_000 });
await l.lock('x', { timeoutMs: 500 }).catch((e) => console.log('lock:', (e as Error).name));
const t0 = performance.now();
await l.close();
const show = (when: string): void => {
  const hs = (process as unknown as { _getActiveHandles(): object[] })._getActiveHandles();
  console.log(when, hs.map((h) => {
    const any = h as { constructor: { name: string }; _idleTimeout?: number; remotePort?: number; _onTimeout?: { toString(): string } };
    return `${any.constructor.name}${any._idleTimeout ? `(${any._idleTimeout}ms ${String(any._onTimeout).slice(0, 120).replace(/\s+/g, ' ')})` : ''}${any.remotePort ? `(->${any.remotePort})` : ''}`;
  }).join(' | '));
};
show('after close:');
setTimeout(() => show('at 100ms:'), 100).unref();
process.on('exit', () => console.log('exit at', Math.round(performance.now() - t0), 'ms after close'));
