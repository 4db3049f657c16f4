/**
 * `gate402 pay` starts from one esbuild bundle instead of tsx compiling its TypeScript and Node resolving and loading
 * hundreds of modules of viem, the x402 clients and mppx on every call. The bundle is made on first use and kept under
 * node_modules/.cache/gate402 (the system's temporary directory when that cannot be written), named by a hash of what
 * went into it: the sources it was built from, package-lock.json, and the versions of Node and esbuild. Any change to
 * those makes the next call build again, so there is no build step to run by hand nor a stale bundle to forget.
 *
 * Plain JavaScript, so that it runs before (and without) tsx.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const ENTRY = join(REPO, 'src/cli/pay-command.ts');
const INPUTS = 'pay-inputs.json';

/** Where bundles are kept: the first of these that can be written. */
function cacheDirs() {
  return [join(REPO, 'node_modules/.cache/gate402'), join(tmpdir(), `gate402-cache-${process.getuid?.() ?? 'user'}`)];
}

/** The hash of everything a bundle depends on, given the repository files it was built from (relative paths). */
function keyOf(files) {
  const hash = createHash('sha256');
  hash.update(`node ${process.versions.node}\n`);
  for (const name of ['package-lock.json', 'node_modules/esbuild/package.json']) {
    const path = join(REPO, name);
    hash.update(`${name}\n`);
    if (existsSync(path)) hash.update(readFileSync(path));
  }
  for (const file of files) {
    const path = join(REPO, file);
    // A source that is gone (renamed, deleted) changes the key: the next build finds the new graph.
    hash.update(`${file}\n`);
    if (existsSync(path)) hash.update(readFileSync(path));
  }
  return hash.digest('hex').slice(0, 32);
}

/** The bundle that is current for the sources as they are now, if one was built: its path, else undefined. */
function currentBundle(dir) {
  const inputsPath = join(dir, INPUTS);
  if (!existsSync(inputsPath)) return undefined;
  let files;
  try {
    files = JSON.parse(readFileSync(inputsPath, 'utf8')).files;
  } catch {
    return undefined;
  }
  if (!Array.isArray(files)) return undefined;
  const path = join(dir, `pay-${keyOf(files)}.mjs`);
  return existsSync(path) ? path : undefined;
}

/** Builds the bundle into `dir` (written under a temporary name, then renamed: concurrent calls never see half a file). */
async function build(dir) {
  const { build: esbuild } = await import('esbuild');
  const result = await esbuild({
    entryPoints: [ENTRY],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: `node${process.versions.node.split('.')[0]}`,
    write: false,
    metafile: true,
    logLevel: 'silent',
    // Smaller to parse at every start.
    minify: true,
    absWorkingDir: REPO,
    // Some dependencies are CommonJS and `require` Node's own modules.
    banner: { js: "import { createRequire as __gate402Require } from 'node:module'; const require = __gate402Require(import.meta.url);" },
  });
  const files = Object.keys(result.metafile.inputs)
    .filter((f) => !f.includes('node_modules/'))
    .map((f) => relative(REPO, resolve(REPO, f)))
    .sort();
  const key = keyOf(files);
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `pay-${key}.mjs`);
  const part = `${path}.${process.pid}.tmp`;
  writeFileSync(part, result.outputFiles[0].contents);
  renameSync(part, path);
  const inputsPart = join(dir, `${INPUTS}.${process.pid}.tmp`);
  writeFileSync(inputsPart, JSON.stringify({ files }));
  renameSync(inputsPart, join(dir, INPUTS));
  // Earlier bundles are of sources that have changed since: they would never be used again.
  for (const name of readdirSync(dir)) {
    if (name.startsWith('pay-') && name.endsWith('.mjs') && join(dir, name) !== path) rmSync(join(dir, name), { force: true });
  }
  return path;
}

/**
 * The pay command's module: the current bundle (built first when there is none), or, when no bundle can be built or
 * kept (esbuild missing, nowhere writable), the TypeScript source through tsx. `how` says which.
 */
export async function loadPayCommand() {
  for (const dir of cacheDirs()) {
    const found = currentBundle(dir);
    if (found) return { how: 'bundle', path: found, module: await import(pathToFileURL(found).href) };
  }
  for (const dir of cacheDirs()) {
    try {
      const path = await build(dir);
      return { how: 'built', path, module: await import(pathToFileURL(path).href) };
    } catch {
      // Next place, then the source.
    }
  }
  const { register } = await import('tsx/esm/api');
  register();
  return { how: 'source', path: ENTRY, module: await import(pathToFileURL(ENTRY).href) };
}
