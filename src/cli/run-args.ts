/**
 * `locksmith run` reads its arguments as flock does: options, the lock id (options may
 * follow it too), then the command — the first word after the lock id that is not an option
 * starts the command, and everything from there is the command's own (`run job echo -n hi`
 * passes `-n` to echo). `--` ends the options explicitly, as before. See docs/cli.md.
 */
import type { Option } from 'commander';

/** What a short or long option name needs: a value in the next word (`required`), maybe one (`optional`), or none. */
type Arity = 'none' | 'required' | 'optional';

function arities(options: readonly Option[]): Map<string, Arity> {
  const map = new Map<string, Arity>();
  for (const o of options) {
    const arity: Arity = o.required ? 'required' : o.optional ? 'optional' : 'none';
    if (o.short) map.set(o.short, arity);
    if (o.long) map.set(o.long, arity);
  }
  return map;
}

/** How many words the option at `words[i]` takes (1 or 2). Unknown options take one word; commander rejects them. */
function optionWidth(words: readonly string[], i: number, known: Map<string, Arity>): number {
  const word = words[i] ?? '';
  if (word.startsWith('--')) {
    if (word.includes('=')) return 1;
    return known.get(word) === 'required' ? 2 : 1;
  }
  // Short options may be grouped (-sq) and a value may be attached (-w5, -E3).
  for (let k = 1; k < word.length; k += 1) {
    const arity = known.get(`-${word[k] ?? ''}`);
    if (arity === 'required') return k === word.length - 1 ? 2 : 1;
    if (arity === 'optional') return 1;
  }
  return 1;
}

/**
 * The words after `run`, rewritten for commander: the options and the lock id, then `--`
 * and the command (when there is one). A word starting with `-` before the command is an
 * option; `-` alone and anything after the lock id that is not an option start the command.
 */
export function splitRunArgs(words: readonly string[], options: readonly Option[]): string[] {
  const known = arities(options);
  const head: string[] = [];
  let lockIdSeen = false;
  for (let i = 0; i < words.length;) {
    const word = words[i] ?? '';
    // `run [options] -- lockId cmd…` works too: commander takes the first operand as the lock id.
    if (word === '--') return [...head, '--', ...words.slice(i + 1)];
    if (word.startsWith('-') && word !== '-') {
      const width = optionWidth(words, i, known);
      head.push(...words.slice(i, i + width));
      i += width;
      continue;
    }
    if (lockIdSeen) return [...head, '--', ...words.slice(i)];
    head.push(word);
    lockIdSeen = true;
    i += 1;
  }
  return head;
}
