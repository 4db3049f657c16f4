// Test-only, preloaded into a spawned gate402 with
//   NODE_OPTIONS="--expose-gc --import=<this file>"  GATE402_TEST_HEAP_FILE=<path>
// On SIGUSR2 it collects garbage (fully, several times) and writes the heap in use, as JSON, to that file. The
// product has no such hook: the test measures the real process from outside.
import { renameSync, writeFileSync } from 'node:fs';

const file = process.env.GATE402_TEST_HEAP_FILE;
if (file && typeof globalThis.gc === 'function') {
  let seq = 0;
  process.on('SIGUSR2', () => {
    // Let pending callbacks finish first, so that nothing in flight is counted.
    setTimeout(() => {
      for (let i = 0; i < 4; i++) globalThis.gc();
      const m = process.memoryUsage();
      // Written aside and renamed into place: the test polls the file, and must never read it half written.
      writeFileSync(`${file}.tmp`, JSON.stringify({ seq: ++seq, heapUsed: m.heapUsed, heapTotal: m.heapTotal, rss: m.rss }));
      renameSync(`${file}.tmp`, file);
    }, 200);
  });
}
