// tap `after`: stop the run's devnet; its anvils go down with it.
import { existsSync } from 'node:fs';
import { readManifest } from '../../src/devnet/manifest.ts';
import { TEST_MANIFEST_PATH } from '../helpers/devnet.ts';

if (existsSync(TEST_MANIFEST_PATH)) {
  const { pid } = readManifest(TEST_MANIFEST_PATH);
  try {
    process.kill(pid, 'SIGTERM');
    const deadline = Date.now() + 10_000;
    for (;;) {
      process.kill(pid, 0);
      if (Date.now() > deadline) {
        process.kill(pid, 'SIGKILL');
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  } catch {
    // already gone
  }
}
