// Run after `npm install` changes the lock file: `node .ci/lock-platforms.mjs`.
// The registry here carries only some platforms' prebuilt packages (anvil has no darwin or arm64 builds in it), so
// npm leaves the others out of package-lock.json and `npm ci` then rejects the lock as out of sync. A lock file
// normally lists every platform's optional package with its os and cpu, and npm skips those that do not match:
// this adds the missing entries in that form. It changes nothing that installs on this platform.
import { readFileSync, writeFileSync } from 'node:fs';

const PLATFORMS = {
  'darwin-amd64': ['darwin', 'x64'],
  'darwin-arm64': ['darwin', 'arm64'],
  'darwin-x64': ['darwin', 'x64'],
  'linux-amd64': ['linux', 'x64'],
  'linux-x64': ['linux', 'x64'],
  'linux-arm64': ['linux', 'arm64'],
  'linux-arm': ['linux', 'arm'],
  'win32-amd64': ['win32', 'x64'],
  'win32-x64': ['win32', 'x64'],
  'win32-arm64': ['win32', 'arm64'],
  'android-arm64': ['android', 'arm64'],
  'android-x64': ['android', 'x64'],
  // musl builds (Alpine): the same os and cpu, told apart by libc.
  'linux-x64-musl': ['linux', 'x64', 'musl'],
  'linux-arm64-musl': ['linux', 'arm64', 'musl'],
};
const lock = JSON.parse(readFileSync('package-lock.json', 'utf8'));
const added = [];
for (const entry of Object.values(lock.packages)) {
  for (const [dep, version] of Object.entries(entry.optionalDependencies ?? {})) {
    const key = `node_modules/${dep}`;
    if (lock.packages[key]) continue;
    const suffix = Object.keys(PLATFORMS).find((s) => dep.endsWith(`-${s}`));
    if (!suffix) continue;
    const [os, cpu, libc] = PLATFORMS[suffix];
    lock.packages[key] = { version, cpu: [cpu], os: [os], ...(libc ? { libc: [libc] } : {}), optional: true, ...(entry.dev ? { dev: true } : {}) };
    added.push(`${dep}@${version}`);
  }
}
lock.packages = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a.localeCompare(b))));
writeFileSync('package-lock.json', `${JSON.stringify(lock, null, 2)}\n`);
console.log(added.length ? `added ${added.join(', ')}` : 'nothing to add');
