/**
 * What the linter cannot see in comments: a citation of a docs page (in a comment or in code)
 * must name a page and a section that exist, and a comment must not cite what a reader of the repository cannot
 * reach (issue trackers, review items, a paper's listings, the project's seeds or its SPEC).
 * test/unit/citations.test.ts runs it in `npm test`; `npx tsx scripts/citations.ts` prints
 * the same report.
 *
 * The citation forms the code uses: `docs/x.md` (the page), `docs/x.md, "Section"`,
 * `docs/x.md ("Section")` and `docs/x.md#anchor` (GitHub's heading slug). A section matches
 * a heading of the page when it equals the heading's text or its first words (`"Layout"`
 * cites `## Layout (znodes)`).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

const root = resolve(import.meta.dirname, '..');
/** Where citations are looked for. */
export const SCANNED = ['src', 'test', 'bench', 'scripts', 'eslint.config.js'];
const TEXT = new Set(['.ts', '.js', '.mjs', '.cjs', '.lua', '.java', '.sh']);

/** One finding: where, and what is wrong. */
export interface Offence {
  readonly file: string;
  readonly line: number;
  readonly problem: string;
}

/** Phrases that cite what a reader of the repository cannot open. */
const UNREACHABLE: readonly [RegExp, string][] = [
  [/\bissues?\s+#?\d+/gi, 'cites an issue number'],
  [/\bitems?\s+\d+/gi, 'cites an item number'],
  [/\blistings?\s+\d+/gi, 'cites a listing number'],
  // Cassandra's seed node is a term of the engine; the project's seed documents are cited as
  // "the seeds", "seed 3" or "seed doc".
  [/\bthe seeds\b|\bseeds?\s+(?:#?\d+|docs?\b|documents?\b)/gi, 'cites the seeds'],
  [/\bSPEC\b/g, 'cites the SPEC'],
];

const QUOTED = '"([^"]{1,120})"';
const CITATION = new RegExp(
  `docs/([\\w./-]+?\\.md)(?:#([\\w-]+)|,?[\\s*/]*\\(?[\\s*/]*${QUOTED}(?:[\\s*/]*(?:and|,)[\\s*/]*${QUOTED})?)?`,
  'g',
);

/** Every scanned file, relative to the root. */
function files(): string[] {
  const out: string[] = [];
  const walk = (path: string): void => {
    const full = join(root, path);
    if (!existsSync(full)) return;
    if (statSync(full).isDirectory()) {
      for (const entry of readdirSync(full)) if (entry !== 'node_modules' && !entry.startsWith('.')) walk(join(path, entry));
    } else if (TEXT.has(extname(path))) out.push(path);
  };
  for (const path of SCANNED) walk(path);
  return out.sort();
}

/** What a test runner prints as a name: the first argument of `test`, `describe`, `it`, `suite`. */
const TITLED = new Set(['test', 'describe', 'it', 'suite']);

/**
 * The comments of a TypeScript/JavaScript file with their offsets, and the titles of its
 * tests (a reader sees them in every test report); other files are all comment.
 */
function comments(path: string, text: string): { readonly pos: number; readonly text: string }[] {
  if (!/\.[mc]?[jt]s$/.test(path)) return [{ pos: 0, text }];
  // The parser, not a scan: template text (Lua, shell) and regular expressions are no comments.
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found = new Map<number, string>();
  const visit = (node: ts.Node): void => {
    const ranges = [...(ts.getLeadingCommentRanges(text, node.pos) ?? []), ...(ts.getTrailingCommentRanges(text, node.end) ?? [])];
    for (const r of ranges) found.set(r.pos, text.slice(r.pos, r.end));
    if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && TITLED.has(node.expression.text)) {
      const title = node.arguments[0];
      if (title && (ts.isStringLiteral(title) || ts.isNoSubstitutionTemplateLiteral(title))) found.set(title.getStart(source), title.text);
    }
    for (const child of node.getChildren(source)) visit(child);
  };
  visit(source);
  return [...found].sort(([a], [b]) => a - b).map(([pos, comment]) => ({ pos, text: comment }));
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

const headingCache = new Map<string, string[] | undefined>();
/** The headings of a docs page (without `#`s and backticks), or undefined when it does not exist. */
function headings(page: string): string[] | undefined {
  if (!headingCache.has(page)) {
    const full = join(root, 'docs', page);
    const text = existsSync(full) ? readFileSync(full, 'utf8').replace(/^```[\s\S]*?^```/gm, '') : undefined;
    const found = text === undefined ? undefined : (text.match(/^#{1,6}\s+.*$/gm) ?? []);
    headingCache.set(
      page,
      found?.map((h) =>
        h
          .replace(/^#+\s+/, '')
          .replace(/`/g, '')
          .trim(),
      ),
    );
  }
  return headingCache.get(page);
}

/** True when `section` is a heading's text or its first words. */
function hasSection(all: readonly string[], section: string): boolean {
  const wanted = section.replace(/`/g, '').trim().toLowerCase();
  return all.some((h) => {
    const heading = h.toLowerCase();
    return heading === wanted || (heading.startsWith(wanted) && /^[\s:(—–-]/.test(heading.slice(wanted.length)));
  });
}

/** The line of offset `pos` in `text`. */
function lineOf(text: string, pos: number): number {
  let line = 1;
  for (let i = text.indexOf('\n'); i !== -1 && i < pos; i = text.indexOf('\n', i + 1)) line++;
  return line;
}

/** The offences in one file's text (`file` decides what is comment: see {@link comments}). */
export function offencesIn(file: string, text: string): Offence[] {
  const offences: Offence[] = [];
  for (const comment of comments(file, text)) {
    const at = (offset: number): number => lineOf(text, comment.pos + offset);
    for (const [pattern, problem] of UNREACHABLE) {
      for (const m of comment.text.matchAll(pattern)) {
        offences.push({ file, line: at(m.index), problem: `${problem} ("${m[0]}"): state the rule itself or cite docs/` });
      }
    }
  }
  // A page named in code (an error message, a help text) must exist as much as one in a comment.
  for (const m of text.matchAll(CITATION)) offences.push(...citationOffences(file, lineOf(text, m.index), m));
  return offences;
}

/** What is wrong with one citation (nothing when the page and its sections exist). */
function citationOffences(file: string, line: number, m: RegExpExecArray | RegExpMatchArray): Offence[] {
  const [, page = '', anchor, ...quoted] = m;
  const all = headings(page);
  if (all === undefined) return [{ file, line, problem: `cites docs/${page}, which does not exist` }];
  if (anchor !== undefined && !all.some((h) => slug(h) === anchor)) {
    return [{ file, line, problem: `cites docs/${page}#${anchor}, which is no heading of that page` }];
  }
  const offences: Offence[] = [];
  for (const q of quoted) {
    const section = q?.replace(/\s*\n\s*(?:\*|\/\/)?\s*/g, ' ');
    if (section !== undefined && !hasSection(all, section)) {
      offences.push({ file, line, problem: `cites docs/${page}, "${section}", which is no heading of that page` });
    }
  }
  return offences;
}

/** Every offence in the scanned files. */
export function findOffences(): Offence[] {
  return files()
    .filter((file) => file !== 'scripts/citations.ts' && file !== 'test/unit/citations.test.ts') // they quote the rules
    .flatMap((file) => offencesIn(file, readFileSync(join(root, file), 'utf8')));
}

/** The offences as a report, one line each. */
export function formatOffences(offences: readonly Offence[]): string {
  return offences.map((o) => `${relative(root, join(root, o.file))}:${o.line}: ${o.problem}`).join('\n');
}

if (import.meta.filename === resolve(process.argv[1] ?? '')) {
  const offences = findOffences();
  console.log(offences.length === 0 ? 'no offences' : formatOffences(offences));
  process.exit(offences.length === 0 ? 0 : 1);
}
