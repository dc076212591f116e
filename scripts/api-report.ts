/**
 * The API report: the export names of every entry point in package.json `exports`, read
 * from the sources with the TypeScript checker (no build), written to api/exports.json.
 * `npm run api:report` rewrites the snapshot; `npm run api:report -- --check` (and
 * test/package/api.test.ts) fails when the sources export something else. A name marked
 * `@internal` is stripped from the published declarations (tsconfig.build.json
 * `stripInternal`) and is reported as such, so that it is visibly not part of the contract.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import ts from 'typescript';

const root = resolve(import.meta.dirname, '..');
/** Where the snapshot lives, relative to the repository root. */
export const SNAPSHOT = 'api/exports.json';

/** Entry point (`locksmith-dlm`, `locksmith-dlm/redis`, …) → export name → kind. */
export type ApiReport = Record<string, Record<string, string>>;

interface PackageJson {
  readonly name: string;
  readonly exports: Record<string, string | { readonly types?: string }>;
}

/** The source file behind each entry point: `./dist/x/index.d.ts` is `src/x/index.ts`. */
export function entryPoints(): Map<string, string> {
  const pkg = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8')) as PackageJson;
  const entries = new Map<string, string>();
  for (const [subpath, target] of Object.entries(pkg.exports)) {
    const types = typeof target === 'string' ? undefined : target.types;
    if (types === undefined) continue; // `./package.json`
    const source = types.replace(/^\.\/dist\//, 'src/').replace(/\.d\.ts$/, '.ts');
    entries.set(subpath === '.' ? pkg.name : `${pkg.name}/${subpath.replace(/^\.\//, '')}`, source);
  }
  return entries;
}

/** What a symbol is, as a user sees it: a value (class, function, const) or only a type. */
function kindOf(symbol: ts.Symbol): string {
  const f = symbol.flags;
  if (f & ts.SymbolFlags.Class) return 'class';
  if (f & ts.SymbolFlags.Function) return 'function';
  if (f & ts.SymbolFlags.Enum) return 'enum';
  if (f & ts.SymbolFlags.Variable) return 'const';
  if (f & ts.SymbolFlags.Interface) return 'interface';
  if (f & ts.SymbolFlags.TypeAlias) return 'type';
  return 'other';
}

/** True when the export (or the declaration it names) carries an `@internal` tag. */
function isInternal(exported: ts.Symbol, target: ts.Symbol): boolean {
  const tagged = (s: ts.Symbol): boolean =>
    (s.declarations ?? []).some((d) => {
      const node = ts.isExportSpecifier(d) ? d.parent.parent : d;
      return ts.getJSDocTags(node).some((t) => t.tagName.text === 'internal') || /@internal\b/.test(jsDocText(node));
    });
  return tagged(exported) || tagged(target);
}

/** The leading JSDoc text of a node (export declarations are not JSDoc hosts for the API). */
function jsDocText(node: ts.Node): string {
  const text = node.getSourceFile().getFullText();
  const ranges = ts.getLeadingCommentRanges(text, node.getFullStart()) ?? [];
  return ranges.map((r) => text.slice(r.pos, r.end)).join('\n');
}

/** The export names of every entry point, from the sources. */
export function apiReport(): ApiReport {
  const entries = entryPoints();
  const parsed = ts.getParsedCommandLineOfConfigFile(
    resolve(root, 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  );
  if (parsed === undefined) throw new Error('tsconfig.json does not parse');
  const files = [...entries.values()].map((f) => resolve(root, f));
  const program = ts.createProgram(files, { ...parsed.options, noEmit: true });
  const checker = program.getTypeChecker();
  const report: ApiReport = {};
  for (const [entry, file] of entries) {
    const source = program.getSourceFile(resolve(root, file));
    const moduleSymbol = source === undefined ? undefined : checker.getSymbolAtLocation(source);
    if (moduleSymbol === undefined) throw new Error(`${entry}: ${file} is missing or exports nothing`);
    const names: Record<string, string> = {};
    const exports = checker.getExportsOfModule(moduleSymbol).sort((a, b) => a.name.localeCompare(b.name, 'en'));
    for (const exported of exports) {
      const target = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      names[exported.name] = kindOf(target) + (isInternal(exported, target) ? ' @internal' : '');
    }
    report[entry] = names;
  }
  return report;
}

/** The snapshot as committed. */
export function readSnapshot(): ApiReport {
  return JSON.parse(readFileSync(resolve(root, SNAPSHOT), 'utf8')) as ApiReport;
}

/** One line per difference between the snapshot and the sources (empty when they agree). */
export function differences(snapshot: ApiReport, current: ApiReport): string[] {
  const lines: string[] = [];
  for (const entry of new Set([...Object.keys(snapshot), ...Object.keys(current)])) {
    const was = snapshot[entry];
    const now = current[entry];
    if (was === undefined || now === undefined) {
      lines.push(`${entry}: entry point ${was === undefined ? 'added' : 'removed'}`);
      continue;
    }
    for (const name of new Set([...Object.keys(was), ...Object.keys(now)])) {
      if (was[name] === now[name]) continue;
      if (was[name] === undefined) lines.push(`${entry}: + ${name} (${now[name]})`);
      else if (now[name] === undefined) lines.push(`${entry}: - ${name} (${was[name]})`);
      else lines.push(`${entry}: ${name} was ${was[name]}, now ${now[name]}`);
    }
  }
  return lines;
}

/** The snapshot file's text (the layout prettier keeps). */
export function render(report: ApiReport): string {
  return `${JSON.stringify(report, null, 2)}\n`;
}

if (import.meta.filename === resolve(process.argv[1] ?? '')) {
  const current = apiReport();
  if (process.argv.includes('--check')) {
    const diff = differences(readSnapshot(), current);
    if (diff.length > 0) {
      console.error(`The exports differ from ${SNAPSHOT}:\n  ${diff.join('\n  ')}\nIf intended, run \`npm run api:report\` and commit it.`);
      process.exit(1);
    }
    console.log(`${SNAPSHOT} matches the sources`);
  } else {
    writeFileSync(resolve(root, SNAPSHOT), render(current));
    const counts = Object.entries(current).map(([entry, names]) => `${entry} ${Object.keys(names).length}`);
    console.log(`wrote ${SNAPSHOT}: ${counts.join(', ')}`);
  }
}
