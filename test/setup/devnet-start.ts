// tap `before`: one devnet for the whole run, on free ports, so the suite runs beside `npm start`.
import { TEST_MANIFEST_PATH } from '../helpers/devnet.ts';
import { spawnDevnet } from '../helpers/spawn-devnet.ts';

const started = Date.now();
const { child } = await spawnDevnet(TEST_MANIFEST_PATH, { detached: true, exitAfter: 1800 });
child.unref();
process.stdout.write(`# test devnet up in ${((Date.now() - started) / 1000).toFixed(1)}s (pid ${child.pid})\n`);
