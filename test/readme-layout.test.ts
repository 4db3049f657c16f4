// README's layout table is the map a newcomer reads first: it names every folder of src/, and every path it names
// exists. A folder added, moved or removed without the table is a failure here.
import t from 'tap';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const readme = readFileSync(join(root, 'README.md'), 'utf8');
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
