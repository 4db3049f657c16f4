/**
 * `gate402 gateway` and `gate402 facilitator` start from the service's bundle (src/cli/bundle.mjs): the project's
 * modules in one file, built when the sources change, with no tsx loaded. A start through tsx cost 1.8-2.3 CPU s to
 * healthy, from the bundle 1.0-1.4. The bundle must still find what its modules read beside their sources: the
 * signature worker (a paid request's signature is checked in it) and the web client's files; and its stack traces
 * must still name the sources (a source map beside it).
 */
import t from 'tap';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TEST_MANIFEST_PATH } from './helpers/devnet.ts';
import { spawnFacilitator } from './helpers/spawn-facilitator.ts';
import { tempDir } from './helpers/temp-dir.ts';

const logs = tempDir('service-bundle');
t.teardown(() => rmSync(logs, { recursive: true, force: true }));
const FIXTURE = join(import.meta.dirname, 'fixtures/module-log.mjs');

for (const part of ['facilitator', 'gateway'] as const) {
  t.test(`gate402 ${part} runs from the service bundle, without tsx`, async (t) => {
    const log = join(logs, `${part}.modules`);
    const svc = await spawnFacilitator({ manifestPath: TEST_MANIFEST_PATH, part, env: { NODE_OPTIONS: `--import=${FIXTURE}`, GATE402_MODULE_LOG: log } });
    t.teardown(() => svc.stop());
    const loaded = readFileSync(log, 'utf8').trim().split('\n');
    const bundle = loaded.find((u) => /\/node_modules\/\.cache\/gate402\/service-node\d+-[0-9a-f]{32}\.mjs$/.test(u));
    t.ok(bundle, 'the bundle ran');
    if (bundle) {
      // Its stack traces name the sources: the map beside it leads back to them.
      const map = JSON.parse(readFileSync(`${fileURLToPath(bundle)}.map`, 'utf8')) as { sources: string[] };
      const sources = map.sources.map((s) => resolve(dirname(fileURLToPath(bundle)), s));
      t.ok(sources.includes(resolve('src/cli/main.ts')) && sources.every((s) => existsSync(s)), `its source map names the sources (${sources.length})`);
    }
    t.same(
      loaded.filter((u) => u.includes('/node_modules/tsx/')),
      [],
      'tsx was never loaded',
    );
    t.same(
      loaded.filter((u) => /\/src\/.*\.ts$/.test(u) && !u.endsWith('/src/verify/signature/worker.ts')),
      [],
      'no module of the source was loaded but the signature worker (its threads load it beside its entry)',
    );
    if (part === 'facilitator') {
      const supported = await fetch(`${svc.url}/supported`);
      t.equal(supported.status, 200, '/supported answers');
    } else {
      const page = await fetch(`${svc.url}/`);
      t.equal(page.status, 200, 'the marketplace page (the web client, read beside its source) is served');
      t.match(await page.text(), /<html/i);
    }
  });
}
