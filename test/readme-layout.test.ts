// README is the entry a newcomer reads first, docs/ the manual. What keeps them true to the code:
// - README's layout table names every folder of src/, and every path it names exists: a folder added, moved or
//   removed without the table is a failure here;
// - README stays an entry: at most 250 lines, its two Get going commands, a link to every page of docs/;
// - every link of README and docs/ lands on a file that exists and, for a page, on one of its headings;
// - every GATE402_* setting the code reads has exactly one row in a settings table (header `variable`) of README or
//   docs/, and every row names a setting something still reads.
import t from 'tap';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const readme = readFileSync(join(root, 'README.md'), 'utf8');
const docPages = readdirSync(join(root, 'docs'))
  .filter((f) => f.endsWith('.md'))
  .map((f) => `docs/${f}`);
const pages = ['README.md', ...docPages];
const text = new Map(pages.map((p) => [p, readFileSync(join(root, p), 'utf8')]));

/** The page's lines outside fenced code blocks (a `# comment` in a shell block is no heading, a `|` no table). */
function prose(markdown: string): string[] {
  let fenced = false;
  return markdown.split('\n').filter((line) => {
    if (/^\s*```/.test(line)) {
      fenced = !fenced;
      return false;
    }
    return !fenced;
  });
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, each space a hyphen; repeats get -1, -2, ... */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of prose(markdown)) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = (m[1] ?? '')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Each table of the page: its header cells and its rows' cells (the separator row left out). */
function tables(markdown: string): { header: string[]; rows: string[][] }[] {
  const out: { header: string[]; rows: string[][] }[] = [];
  let current: string[][] | undefined;
  for (const line of prose(markdown)) {
    if (!line.startsWith('|')) {
      current = undefined;
      continue;
    }
    const cells = line
      .trim()
      .replace(/^\||\|$/g, '')
      .split('|')
      .map((c) => c.trim());
    if (!current) {
      current = [cells];
      out.push({ header: cells, rows: [] });
    } else if (!cells.every((c) => /^:?-+:?$/.test(c))) out[out.length - 1]?.rows.push(cells);
  }
  return out;
}

t.test('layout', async (t) => {
  const section = readme.split(/^## /m).find((s) => s.startsWith('Layout\n'));
  t.ok(section, 'README has a Layout section');
  const rows = (section ?? '').split('\n').filter((l) => l.startsWith('| `'));
  const named = new Set(rows.flatMap((row) => [...(row.split('|')[1] ?? '').matchAll(/`([^`]+)`/g)].map((m) => (m[1] ?? '').replace(/\/$/, ''))));

  t.test('every folder of src/ has a row', async (t) => {
    const folders = readdirSync(join(root, 'src'), { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => `src/${d.name}`);
    t.ok(folders.length > 0);
    t.same(
      folders.filter((f) => !named.has(f)),
      [],
      'folders missing from the table',
    );
  });

  t.test('every path the table names exists', async (t) => {
    t.ok(named.size > 0);
    t.same(
      [...named].filter((p) => !existsSync(join(root, p))),
      [],
      'named but absent',
    );
  });
});

t.test('README is an entry', async (t) => {
  const lines = readme.replace(/\n$/, '').split('\n').length;
  t.ok(lines <= 250, `README.md has ${lines} lines (at most 250)`);

  const getGoing = readme.split(/^## /m).find((s) => s.startsWith('Get going'));
  const block = /```sh\n([\s\S]*?)```/.exec(getGoing ?? '')?.[1] ?? '';
  const commands = block
    .split('\n')
    .map((l) => l.replace(/#.*$/, '').trim())
    .filter(Boolean);
  t.same(commands, ['npm ci && npm start', 'npm test'], 'Get going opens with the two commands: start everything, run the tests');

  const linked = new Set([...readme.matchAll(/\]\((docs\/[^)#\s]+)/g)].map((m) => m[1]));
  t.ok(docPages.length > 0, 'docs/ has pages');
  t.same(
    docPages.filter((p) => !linked.has(p)),
    [],
    'pages of docs/ README does not link',
  );
});

t.test("the paid path's drawing names paths that exist", async (t) => {
  const drawing = /```mermaid\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
  const paths = [...new Set([...drawing.matchAll(/\bsrc\/[a-z0-9/._-]*[a-z0-9]/g)].map((m) => m[0]))];
  t.ok(paths.length >= 6, `the drawing names ${paths.join(', ')}`);
  t.same(
    paths.filter((p) => !existsSync(join(root, p))),
    [],
    'named in the drawing, absent',
  );
});

t.test('every link of README and docs/ lands', async (t) => {
  const broken: string[] = [];
  let checked = 0;
  for (const [page, markdown] of text) {
    const body = prose(markdown)
      .join('\n')
      .replace(/`[^`\n]*`/g, '');
    for (const m of body.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1] ?? '';
      if (/^[a-z]+:/i.test(target)) continue;
      checked++;
      const [path = '', anchor] = target.split('#');
      const file = path === '' ? join(root, page) : resolve(dirname(join(root, page)), path);
      const name = relative(root, file);
      if (!existsSync(file)) {
        broken.push(`${page}: ${target} (no ${name})`);
        continue;
      }
      if (anchor === undefined) continue;
      if (statSync(file).isDirectory() || !file.endsWith('.md')) {
        broken.push(`${page}: ${target} (an anchor into ${name}, not a page)`);
        continue;
      }
      if (!anchors(readFileSync(file, 'utf8')).has(anchor)) broken.push(`${page}: ${target} (no heading #${anchor} in ${name})`);
    }
  }
  t.ok(checked > 20, `${checked} links checked`);
  t.same(broken, [], 'links that land nowhere');
});

/** Every file under `dir` (relative to the root) whose name ends in one of `exts`. */
function filesUnder(dir: string, exts: string[]): string[] {
  const full = join(root, dir);
  if (!existsSync(full)) return [];
  return readdirSync(full, { recursive: true, encoding: 'utf8' })
    .filter((f) => exts.some((e) => f.endsWith(e)))
    .map((f) => join(full, f));
}

/** GATE402_* names written in these files. */
function namesIn(files: string[]): Set<string> {
  return new Set(files.flatMap((f) => [...readFileSync(f, 'utf8').matchAll(/GATE402_[A-Z0-9_]+/g)].map((m) => m[0])));
}

/**
 * A name as the settings tables write it: a per-network family (`GATE402_NATIVE_USD_EIP155_` read as a prefix, and
 * any `..._EIP155_8453` of it) is `GATE402_NATIVE_USD_EIP155_<chainId>`. A name no prefix covers is itself
 * (`GATE402_RPC_EIP155_8453` is a setting of its own).
 */
function asDocumented(name: string, prefixes: Set<string>): string {
  if (name.endsWith('_')) return `${name}<chainId>`;
  const family = name.replace(/\d+$/, '');
  return family !== name && prefixes.has(family) ? `${family}<chainId>` : name;
}

/** GATE402_* names in src/ that are not settings, and what they are. */
const NOT_SETTINGS: Record<string, string> = {
  GATE402_UPSTREAM_ADDRESS_FORBIDDEN: 'the error code of an upstream the guard refuses',
};

t.test('every setting is documented exactly once', async (t) => {
  const srcNames = namesIn(filesUnder('src', ['.ts', '.mts', '.mjs']));
  for (const [name, what] of Object.entries(NOT_SETTINGS)) t.ok(srcNames.has(name), `${name} (${what}) is still in src/`);

  const readAnywhere = new Set([...srcNames, ...namesIn([...filesUnder('test', ['.ts', '.mjs']), ...filesUnder('bench', ['.ts', '.mjs']), ...filesUnder('.ci', ['run', 'smoke', '.sh', '.mjs'])])]);
  const prefixes = new Set([...readAnywhere].filter((n) => n.endsWith('_')));
  const settings = new Set([...srcNames].filter((n) => !(n in NOT_SETTINGS)).map((n) => asDocumented(n, prefixes)));
  t.ok(settings.size > 80, `${settings.size} settings read in src/`);

  const rows = new Map<string, string[]>();
  for (const [page, markdown] of text) {
    for (const table of tables(markdown)) {
      if (table.header[0] !== 'variable') continue;
      for (const cells of table.rows) {
        for (const m of (cells[0] ?? '').matchAll(/`(GATE402_[A-Z0-9_]+(?:<chainId>)?)`/g)) {
          const name = m[1] ?? '';
          rows.set(name, [...(rows.get(name) ?? []), page]);
        }
      }
    }
  }
  t.same([...settings].filter((s) => !rows.has(s)).sort(), [], 'settings read in src/ without a row (give each a row in docs/configuration.md, with its full name)');
  t.same(
    [...rows]
      .filter(([, where]) => where.length > 1)
      .map(([name, where]) => `${name}: ${where.join(', ')}`)
      .sort(),
    [],
    'settings with more than one row',
  );
  const read = new Set([...readAnywhere].map((n) => asDocumented(n, prefixes)));
  t.same([...rows.keys()].filter((name) => !read.has(name)).sort(), [], 'rows of settings nothing reads');
});
