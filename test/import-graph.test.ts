/**
 * The product stands apart from its devnet, and runs from a production install (`npm ci --omit=dev`):
 *  - no file outside src/devnet/ and src/cli/ imports anything under src/devnet/ (static, dynamic or type import);
 *  - no product file (src/ outside src/devnet/ and src/cli/) imports a package that is only in devDependencies, or
 *    one package.json does not declare;
 *  - what `gate402 facilitator` and `gate402 gateway` load before they serve (the modules statically reachable from
 *    the command line's entry and its part command) loads no devDependency either.
 * Imports are read from each file's syntax tree; relative paths are resolved to files.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import ts from 'typescript';

const REPO = fileURLToPath(new URL('../', import.meta.url));
const SRC = join(REPO, 'src');
const DEVNET = `${join(SRC, 'devnet')}/`;
const CLI = `${join(SRC, 'cli')}/`;

interface ImportEdge {
  specifier: string;
  /** Erased before run time (`import type`, `typeof import(...)`): it loads nothing. */
  typeOnly: boolean;
  /** `import(...)`: loaded when the code runs, not when the importing module loads. */
  dynamic: boolean;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return /\.(ts|mts|mjs|js)$/.test(name) && !name.endsWith('.d.ts') ? [path] : [];
  });
}

/** Every import of a file: declarations, re-exports, `import(...)`, `typeof import(...)` and `require('...')`. */
function importsOf(path: string, text = readFileSync(path, 'utf8')): ImportEdge[] {
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const out: ImportEdge[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const typeOnly =
        clause !== undefined &&
        (clause.isTypeOnly ||
          (clause.name === undefined &&
            clause.namedBindings !== undefined &&
            ts.isNamedImports(clause.namedBindings) &&
            clause.namedBindings.elements.length > 0 &&
            clause.namedBindings.elements.every((e) => e.isTypeOnly)));
      out.push({ specifier: node.moduleSpecifier.text, typeOnly, dynamic: false });
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      out.push({ specifier: node.moduleSpecifier.text, typeOnly: node.isTypeOnly, dynamic: false });
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      out.push({ specifier: node.argument.literal.text, typeOnly: true, dynamic: false });
    } else if (ts.isCallExpression(node)) {
      const [arg] = node.arguments;
      if (arg && ts.isStringLiteralLike(arg)) {
        if (node.expression.kind === ts.SyntaxKind.ImportKeyword) out.push({ specifier: arg.text, typeOnly: false, dynamic: true });
        // A CommonJS require (createRequire): loaded when the module runs it, at its top level here.
        else if (ts.isIdentifier(node.expression) && node.expression.text === 'require') out.push({ specifier: arg.text, typeOnly: false, dynamic: false });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return out;
}

const isRelative = (specifier: string) => specifier.startsWith('./') || specifier.startsWith('../');
const isBuiltin = (specifier: string) => specifier.startsWith('node:') || builtinModules.includes(specifier.split('/')[0] as string);
/** `@scope/name/deep/path` -> `@scope/name`; `name/deep` -> `name`. */
function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return (specifier.startsWith('@') ? parts.slice(0, 2) : parts.slice(0, 1)).join('/');
}

const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { dependencies?: Record<string, string>; devDependencies?: Record<string, string> };
const runtime = new Set(Object.keys(pkg.dependencies ?? {}));
const devOnly = new Set(Object.keys(pkg.devDependencies ?? {}).filter((name) => !runtime.has(name)));

const files = sourceFiles(SRC);
const graph = new Map(files.map((f) => [f, importsOf(f)]));
const rel = (path: string) => relative(REPO, path);
const isProduct = (path: string) => !path.startsWith(DEVNET) && !path.startsWith(CLI);

/** Why a package import would fail in a production install, or undefined when it would not. */
function packageProblem(specifier: string): string | undefined {
  const name = packageOf(specifier);
  if (devOnly.has(name)) return `${name} is only in devDependencies`;
  if (!runtime.has(name)) return `${name} is not in package.json's dependencies`;
  return undefined;
}

t.test('the parser sees every kind of import', async (t) => {
  const edges = importsOf(
    '/x/a.ts',
    [
      "import { a } from './a.ts';",
      "import type { B } from '../devnet/b.ts';",
      "import { type C } from 'c-pkg';",
      "export { d } from '@scope/d/deep.js';",
      "const e = await import('./e.ts');",
      "type F = typeof import('f-pkg');",
      "const g = require('g-pkg/file.json');",
      "const h = `import x from 'not-an-import'`;",
    ].join('\n'),
  );
  t.same(
    edges.map((e) => [e.specifier, e.typeOnly, e.dynamic]),
    [
      ['./a.ts', false, false],
      ['../devnet/b.ts', true, false],
      ['c-pkg', true, false],
      ['@scope/d/deep.js', false, false],
      ['./e.ts', false, true],
      ['f-pkg', true, false],
      ['g-pkg/file.json', false, false],
    ],
  );
  t.equal(packageOf('@uniswap/v3-core/artifacts/x.json'), '@uniswap/v3-core');
  t.equal(packageOf('viem/accounts'), 'viem');
  t.ok(devOnly.has('@uniswap/v3-core'), 'the Uniswap artifacts are a devDependency');
  t.ok(files.some((f) => f.startsWith(DEVNET)) && files.some((f) => !isProduct(f)) && files.some(isProduct), 'all three kinds of file are found');
});

t.test('no product file imports into src/devnet/', async (t) => {
  const offenders: string[] = [];
  for (const [file, edges] of graph) {
    if (!isProduct(file)) continue;
    for (const e of edges) {
      if (isRelative(e.specifier) && `${resolve(dirname(file), e.specifier)}/`.startsWith(DEVNET)) offenders.push(`${rel(file)} imports ${e.specifier}`);
    }
  }
  t.same(offenders, [], 'only src/cli/ wires the devnet in');
});

t.test('no product file imports a package a production install lacks', async (t) => {
  const offenders: string[] = [];
  for (const [file, edges] of graph) {
    if (!isProduct(file)) continue;
    for (const e of edges) {
      if (e.typeOnly || isRelative(e.specifier) || isBuiltin(e.specifier)) continue;
      const problem = packageProblem(e.specifier);
      if (problem) offenders.push(`${rel(file)} imports ${e.specifier}: ${problem}`);
    }
  }
  t.same(offenders, []);
});

t.test('`gate402 facilitator` and `gate402 gateway` load no devDependency before they serve', async (t) => {
  const roots = ['cli/bin.mjs', 'cli/main.ts', 'cli/facilitator-command.ts', 'cli/service.ts'].map((p) => join(SRC, p));
  for (const root of roots) t.ok(graph.has(root), `${rel(root)} exists`);
  const via = new Map<string, string | undefined>(roots.map((r) => [r, undefined]));
  const queue = [...roots];
  const offenders: string[] = [];
  const chain = (file: string): string => {
    const names: string[] = [];
    for (let f: string | undefined = file; f !== undefined; f = via.get(f)) names.unshift(rel(f));
    return names.join(' -> ');
  };
  while (queue.length) {
    const file = queue.shift() as string;
    for (const e of graph.get(file) ?? []) {
      if (e.typeOnly || e.dynamic || isBuiltin(e.specifier)) continue;
      if (isRelative(e.specifier)) {
        const target = resolve(dirname(file), e.specifier);
        if (graph.has(target) && !via.has(target)) {
          via.set(target, file);
          queue.push(target);
        }
        continue;
      }
      const problem = packageProblem(e.specifier);
      if (problem) offenders.push(`${chain(file)} imports ${e.specifier}: ${problem}`);
    }
  }
  t.ok(via.size > 20, `the part commands' static graph is followed (${via.size} modules)`);
  t.same(offenders, []);
});

/** Every relative import (of any kind) from a file under `from` into a file under one of `into`, as `file -> target`. */
function importsInto(from: string, into: readonly string[]): string[] {
  const under = (path: string, dir: string) => path.startsWith(`${join(SRC, dir)}/`);
  const found: string[] = [];
  for (const [file, edges] of graph) {
    if (!under(file, from)) continue;
    for (const e of edges) {
      if (!isRelative(e.specifier)) continue;
      const target = resolve(dirname(file), e.specifier);
      if (into.some((dir) => under(target, dir))) found.push(`${rel(file)} -> ${rel(target)}`);
    }
  }
  return found;
}

t.test('remote settlement stands alone: it imports neither the engine nor the gateway', async (t) => {
  t.same(importsInto('settlement', ['engine', 'gateway']), []);
});

t.test('the gateway depends on the settlement port, never on the engine', async (t) => {
  t.same(importsInto('gateway', ['engine']), []);
});

t.test('metrics import no domain folder: their vocabularies come in through the declare calls', async (t) => {
  // The /metrics listener is an HTTP server with its settings (http/, config/); nothing else outside metrics/.
  const domains = readdirSync(SRC).filter((name) => statSync(join(SRC, name)).isDirectory() && !['metrics', 'http', 'config'].includes(name));
  t.ok(domains.includes('engine') && domains.includes('verify') && domains.includes('ports'), 'the domain folders are listed');
  t.same(importsInto('metrics', domains), []);
});

/** What the engine shows the rest of the code: its facade, its composition, and its machines (drawn by src/statecharts/). */
const ENGINE_SURFACE = ['settlement-engine.ts', 'create-engine.ts', 'payment-machine.ts', 'batch-machine.ts'].map((f) => join(SRC, 'engine', f));

t.test('nothing outside the engine imports its internals', async (t) => {
  const folders = readdirSync(SRC).filter((name) => statSync(join(SRC, name)).isDirectory() && name !== 'engine');
  const offenders = folders.flatMap((folder) => importsInto(folder, ['engine'])).filter((edge) => !ENGINE_SURFACE.some((f) => edge.endsWith(` -> ${rel(f)}`)));
  t.same(offenders, [], `outside src/engine/ only ${ENGINE_SURFACE.map(rel).join(', ')} may be imported`);
});

t.test('no loop between folders', async (t) => {
  const folders = readdirSync(SRC).filter((name) => statSync(join(SRC, name)).isDirectory());
  // Which folders each folder's files import (its own excluded).
  const uses = new Map(folders.map((from) => [from, new Set(folders.filter((to) => to !== from && importsInto(from, [to]).length > 0))]));
  t.ok((uses.get('gateway')?.size ?? 0) > 0, 'the folder graph is read');
  // A folder that reaches itself through others is in a loop; each is named by its shortest way round.
  const loops: string[] = [];
  for (const start of folders) {
    const via = new Map<string, string>();
    const queue = [start];
    while (queue.length > 0 && !via.has(start)) {
      const at = queue.shift() as string;
      for (const next of uses.get(at) ?? []) {
        if (via.has(next)) continue;
        via.set(next, at);
        queue.push(next);
      }
    }
    if (!via.has(start)) continue;
    const way = [start];
    for (let f = via.get(start) as string; f !== start; f = via.get(f) as string) way.unshift(f);
    loops.push([start, ...way].join(' -> '));
  }
  t.same(loops, [], 'folders depend on each other one way only');
});
