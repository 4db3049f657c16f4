// Worker thread of the signature verifier (plain JavaScript, so any Node can load it): each message is a batch of job
// records, answered in order with the string of recovered addresses, or `{ error }` when this thread cannot verify
// (the pool then verifies that batch itself).
//
// A worker thread has its own module loader, and tsx's hooks in the parent do not reach it: on Node 20 a plain
// `import('./worker.ts')` in the worker fails with ERR_UNKNOWN_FILE_EXTENSION whether the parent was started with
// `node --import tsx` (the worker inherits that execArgv, and still cannot load .ts) or registered tsx through its
// API (as src/cli/bin.mjs does). So: try the plain import (it works where the thread can already load TypeScript,
// e.g. a Node with type stripping), and on ERR_UNKNOWN_FILE_EXTENSION import worker.ts through tsx's scoped loader
// (`tsImport` from tsx/esm/api), which registers tsx's hooks for this thread only.
//
// Messages that arrive while the module loads wait in the port: the listener is attached once loading has settled.
import { parentPort } from 'node:worker_threads';

const WORKER_TS = './worker.ts';

async function load() {
  try {
    return (await import(WORKER_TS)).default;
  } catch (err) {
    if (err?.code !== 'ERR_UNKNOWN_FILE_EXTENSION') throw err;
    const { tsImport } = await import('tsx/esm/api');
    return (await tsImport(WORKER_TS, import.meta.url)).default;
  }
}

let verifyBatch;
let failure;
try {
  verifyBatch = await load();
  if (typeof verifyBatch !== 'function') throw new TypeError(`${WORKER_TS} has no default export function`);
} catch (err) {
  failure = `the signature worker could not load: ${err?.stack ?? err}`;
}

parentPort.on('message', (records) => {
  if (failure !== undefined) return parentPort.postMessage({ error: failure });
  let answer;
  try {
    answer = verifyBatch(records);
  } catch (err) {
    answer = { error: String(err?.stack ?? err) };
  }
  parentPort.postMessage(answer);
});
