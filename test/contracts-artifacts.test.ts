import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import t from 'tap';
import { ARTIFACTS_DIR, compileContracts, renderArtifactFiles } from '../src/devnet/contracts/compile.ts';

// The committed artifacts must be exactly what the sources compile to: after editing a .sol file,
// run `npm run build:contracts` and commit the result.
t.test('committed contract artifacts match their Solidity sources', async (t) => {
  const expected = renderArtifactFiles(await compileContracts());

  const committed = (await readdir(ARTIFACTS_DIR)).filter((file) => file.endsWith('.ts')).sort();
  t.same(committed, [...expected.keys()].sort(), 'artifacts/ holds exactly the generated modules');

  for (const [file, text] of expected) {
    const actual = await readFile(join(ARTIFACTS_DIR, file), 'utf8').catch(() => undefined);
    t.ok(actual === text, `artifacts/${file} is up to date (run \`npm run build:contracts\`)`);
  }
});
