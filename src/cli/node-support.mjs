/**
 * Which Node.js releases gate402 runs on, and the one line the command prints on any other. Plain JavaScript, so
 * that `bin.mjs` checks before tsx or any native module loads (on Node 24, uWebSockets.js would end in a stack trace).
 *
 * Why these: the uWebSockets.js build in use (uws-pack 20.0.8) ships a Linux x64 binary for Node ABI 108, 115, 120
 * and 127 only (Node 18, 20, 21, 22), none for Node 23 or later; Node 18 and 21 are past their end of life and
 * lru-cache and piscina need Node 20 or 22. Node 22 is the LTS line CI runs the suite on; Node 20, past its end of
 * life, still runs (CI keeps a short smoke run on it). package.json's `engines` is {@link enginesRange}'s text.
 */

/** Each supported major with its lowest minor. */
export const SUPPORTED_NODE = Object.freeze([Object.freeze({ major: 20, minor: 19 }), Object.freeze({ major: 22, minor: 12 })]);

/** The `engines.node` range of package.json, written from {@link SUPPORTED_NODE}. */
export function enginesRange() {
  return SUPPORTED_NODE.map((r) => `^${r.major}.${r.minor}.0`).join(' || ');
}

/**
 * Undefined when `version` (as `process.version` gives it: `v22.12.0`) is supported; otherwise the one line to print
 * instead of starting.
 */
export function unsupportedNodeMessage(version) {
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(String(version));
  if (m) {
    const major = Number(m[1]);
    const minor = Number(m[2]);
    if (SUPPORTED_NODE.some((r) => r.major === major && minor >= r.minor)) return undefined;
  }
  const list = [...SUPPORTED_NODE]
    .reverse()
    .map((r) => `${r.major} (${r.major}.${r.minor} or later)`)
    .join(' or ');
  return `gate402: Node.js ${version} is not supported; use Node.js ${list}. Node 22 LTS is recommended (README.md, "Supported Node.js").`;
}
