// statecharts/ is what the machines export: a changed machine without `npm run statecharts` fails here.
import t from 'tap';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createMachine, type AnyStateNode } from 'xstate';
import { statechartFiles } from '../src/statecharts/export.ts';
import { CHARTED_MACHINES } from '../src/statecharts/machines.ts';
import { STATECHARTS_DIR } from '../src/statecharts/write.ts';

const stateIds = (node: AnyStateNode): string[] => [node.id, ...Object.values(node.states).flatMap((s) => stateIds(s as AnyStateNode))].sort();
const expected = new Set<string>();

for (const chart of CHARTED_MACHINES) {
  t.test(`statecharts/${chart.name}.* match ${chart.source}`, async (t) => {
    for (const [file, text] of Object.entries(statechartFiles(chart))) {
      expected.add(file);
      const path = join(STATECHARTS_DIR, file);
      t.ok(existsSync(path), `statecharts/${file} exists (run npm run statecharts)`);
      if (existsSync(path)) t.equal(readFileSync(path, 'utf8'), text, `statecharts/${file} is up to date (run npm run statecharts)`);
    }
    const json = JSON.parse(readFileSync(join(STATECHARTS_DIR, `${chart.name}.json`), 'utf8')) as Parameters<typeof createMachine>[0];
    t.same(stateIds(createMachine(json).root), stateIds(chart.machine.root), 'the JSON is an XState config with the same states');
    t.match(readFileSync(join(STATECHARTS_DIR, `${chart.name}.md`), 'utf8'), /```mermaid\nstateDiagram-v2\n/, 'a Mermaid diagram GitHub renders');
  });
}

t.test('statecharts/ holds nothing else, and README.md links every diagram', async (t) => {
  t.same(readdirSync(STATECHARTS_DIR).sort(), [...expected].sort());
  const readme = readFileSync('README.md', 'utf8');
  for (const chart of CHARTED_MACHINES) t.ok(readme.includes(`(statecharts/${chart.name}.md)`), `README links statecharts/${chart.name}.md`);
});
