/** `locksmith status <lockId>`: holders (who, token, expiry), waiters with who they are; exit 0 held, 1 free. */
import { formatIdentity, type Identity, type LockInfo } from '../index.js';

/** `host:pid:random` (as `run` records it) → "pid P on host H"; anything else as it is. */
export function describeOwner(ownerId: string): string {
  const m = /^(.+):(\d+):[A-Za-z0-9_-]{4,}$/.exec(ownerId);
  return m ? `pid ${m[2]} on ${m[1]}` : ownerId;
}

/**
 * Who holds or waits: an owner id of the `run` shape names the command's own pid and host
 * (what its user asked to see); else `name pid@host` from the stored identity; else the owner id.
 */
export function describeWho(who: { readonly ownerId: string; readonly identity?: Identity }): string {
  const owner = describeOwner(who.ownerId);
  if (owner !== who.ownerId || !who.identity) return owner;
  return formatIdentity(who.identity);
}

const stringify = (v: unknown): string => JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x), 2);

/** The text (or JSON) `status` prints. */
export function formatStatus(state: LockInfo, json: boolean): string {
  if (json) {
    const holders = state.holders.map((h) => ({ ...h, holder: describeWho(h) }));
    const queue = state.queue.map((w) => ({ ...w, waiter: describeWho(w) }));
    return `${stringify({ ...state, holders, queue, held: state.holders.length > 0 })}\n`;
  }
  const lines = [`lock: ${state.lockId} (${state.kind})`];
  if (state.holders.length === 0) lines.push('holder: (free)');
  for (const h of state.holders) {
    const exp = h.expiresInMs === undefined ? '' : `, expires in ${h.expiresInMs} ms`;
    const count = h.count > 1 ? `, count ${h.count}` : '';
    const permits = h.weight !== undefined && h.weight > 1 ? `, ${h.weight} permits` : '';
    lines.push(`holder: ${describeWho(h)} (${h.kind}), token ${h.token}${exp}${count}${permits}`);
  }
  lines.push(`waiters: ${state.waiters}`);
  state.queue.forEach((w, i) => {
    const since = w.since === undefined ? '' : `, since ${new Date(w.since).toISOString()}`;
    lines.push(`  ${i + 1}. ${describeWho(w)} (${w.kind}${w.fair ? ', fair' : ''}${since})`);
  });
  if (state.lastToken !== undefined) lines.push(`last token: ${state.lastToken}`);
  return `${lines.join('\n')}\n`;
}
