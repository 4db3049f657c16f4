// tap `before`: one devnet for the whole run, on free ports, so the suite runs beside `npm start` (its chains saved as
// deployed, for the tests that start chains of their own); and one PostgreSQL server, on which each test file that
// asks gets fresh databases (test/helpers/postgres.ts).
import { saveDevnetSnapshot } from '../../src/devnet/snapshot.ts';
import { TEST_DEVNET_SNAPSHOT_DIR, TEST_MANIFEST_PATH } from '../helpers/devnet.ts';
import { spawnSharedPostgres } from '../helpers/postgres.ts';
import { spawnDevnet } from '../helpers/spawn-devnet.ts';

const started = Date.now();
const [{ child, manifest }] = await Promise.all([spawnDevnet(TEST_MANIFEST_PATH, { detached: true, exitAfter: 1800 }), spawnSharedPostgres(1800)]);
child.unref();
// Before any test sends a transaction: the chains as deployed, which every test's own devnet starts from.
await saveDevnetSnapshot(manifest, TEST_DEVNET_SNAPSHOT_DIR);
process.stdout.write(`# test devnet and PostgreSQL up in ${((Date.now() - started) / 1000).toFixed(1)}s (devnet pid ${child.pid})\n`);
