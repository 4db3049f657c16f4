// Piscina worker entry for the signature verifier (plain JavaScript, so any Node can load it).
//
// A worker thread has its own module loader, and tsx's hooks in the parent do not reach it: on Node 20 a plain
// `import('./worker.ts')` in the worker fails with ERR_UNKNOWN_FILE_EXTENSION whether the parent was started with
// `node --import tsx` (the worker inherits that execArgv, and still cannot load .ts) or registered tsx through its
// API (as src/cli/bin.mjs does). So: try the plain import (it works where the thread can already load TypeScript,
// e.g. a Node with type stripping), and on ERR_UNKNOWN_FILE_EXTENSION import worker.ts through tsx's scoped loader
// (`tsImport` from tsx/esm/api), which registers tsx's hooks for this thread only.
//
// The load starts as soon as the thread starts; the exported handler is synchronous once it has finished.

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

let handler;
const ready = load().then(
  (h) => {
    if (typeof h !== 'function') throw new TypeError(`${WORKER_TS} has no default export function`);
    handler = h;
    return h;
  },
  (err) => {
    // Reported through every task. A fresh Error of this thread, as one from the module loader's thread does not
    // survive the trip to the pool (it arrives as an empty object).
    throw new Error(`the signature worker could not load: ${err?.stack ?? err}`);
  },
);
ready.catch(() => {}); // reported through the first task instead

/** @param {{ records: Uint8Array, count: number }} batch */
export default function verifyBatch(batch) {
  return handler !== undefined ? handler(batch) : ready.then((h) => h(batch));
}
