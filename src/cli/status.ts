/** `locksmith status <lockId>`: holders (who, token, expiry), waiters; exit 0 held, 1 free. */
import type { LockState } from '../index.js';

/** `host:pid:random` (as `run` records it) → "pid P on host H"; anything else as it is. */
export function describeOwner(ownerId: string): string {
  const m = /^(.+):(\d+):[A-Za-z0-9_-]{4,}$/.exec(ownerId);
  return m ? `pid ${m[2]} on ${m[1]}` : ownerId;
}

const stringify = (v: unknown): string => JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x), 2);

/** The text (or JSON) `status` prints. */
export function formatStatus(state: LockState, json: boolean): string {
  if (json) {
    const holders = state.holders.map((h) => ({ ...h, holder: describeOwner(h.ownerId) }));
    return `${stringify({ ...state, holders, held: state.holders.length > 0 })}\n`;
  }
  const lines = [`lock: ${state.lockId}`];
  if (state.holders.length === 0) lines.push('holder: (free)');
  for (const h of state.holders) {
    const exp = h.expiresInMs === undefined ? '' : `, expires in ${h.expiresInMs} ms`;
    const count = h.count && h.count > 1 ? `, count ${h.count}` : '';
    lines.push(`holder: ${describeOwner(h.ownerId)} (${h.kind}), token ${h.token}${exp}${count}`);
  }
  lines.push(`waiters: ${state.waiters}`);
  if (state.lastToken !== undefined) lines.push(`last token: ${state.lastToken}`);
  return `${lines.join('\n')}\n`;
}
