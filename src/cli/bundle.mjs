/**
 * `gate402` starts from an esbuild bundle of itself instead of tsx compiling its TypeScript and resolving each of its
 * modules through loader hooks on every start. Two bundles, each made on first use and remade when its inputs change:
 *
 * - `pay`, a buyer's one-shot call: everything in one file (viem, the x402 clients, mppx), so a call resolves and
 *   loads a handful of modules instead of hundreds; kept under node_modules/.cache/gate402, or the system's temporary
 *   directory when that cannot be written.
 * - `service`, every other command: the project's own modules in one file, its packages loaded by Node as they are
 *   (native addons, worker files and files read beside a package stay where they were installed); kept only under
 *   node_modules/.cache/gate402, from where those packages resolve. A module's `import.meta.url` (and `dirname`,
 *   `filename`) stays its own source file's, so files it reads beside itself (migrations, the web client, the
 *   signature worker) are found where they are.
 *
 * A bundle is named by a hash of what went into it: the sources it was built from, this file, package-lock.json, and
 * the versions of Node and esbuild. Any change to those makes the next start build again, so there is no build step to
 * run by hand nor a stale bundle to forget. Where no bundle can be built or kept, the caller runs the source.
 *
 * Plain JavaScript, so that it runs before (and without) tsx.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SRC = join(REPO, 'src') + sep;

/** The bundles `gate402` starts from: the entry, and whether its packages go into the file. */
const BUNDLES = {
  pay: { entry: 'src/cli/pay-command.ts', packages: 'bundle' },
  service: { entry: 'src/cli/main.ts', packages: 'external' },
};

/** Where a bundle is kept: the first of these that can be written (a bundle that imports packages must sit in the repository). */
function cacheDirs(name) {
  const inRepo = join(REPO, 'node_modules/.cache/gate402');
  return BUNDLES[name].packages === 'bundle' ? [inRepo, join(tmpdir(), `gate402-cache-${process.getuid?.() ?? 'user'}`)] : [inRepo];
}

/** The hash of everything a bundle depends on, given the repository files it was built from (relative paths). */
function keyOf(files) {
  const hash = createHash('sha256');
  hash.update(`node ${process.versions.node}\n`);
  // This file too: how a bundle is built is part of what it is.
  for (const name of ['package-lock.json', 'node_modules/esbuild/package.json', 'src/cli/bundle.mjs']) {
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

/**
 * The start of the names of bundle `name`'s files for this Node's major version: the bundles of two Nodes sit side
 * by side (the suite's Node 22 and a smoke run's Node 20), and a build removes only earlier bundles of its own.
 */
function prefixOf(name) {
  return `${name}-node${process.versions.node.split('.')[0]}-`;
}

/** The bundle `name` that is current for the sources as they are now, if one was built: its path, else undefined. */
function currentBundle(name, dir) {
  const inputsPath = join(dir, `${prefixOf(name)}inputs.json`);
  if (!existsSync(inputsPath)) return undefined;
  let files;
  try {
    files = JSON.parse(readFileSync(inputsPath, 'utf8')).files;
  } catch {
    return undefined;
  }
  if (!Array.isArray(files)) return undefined;
  const path = join(dir, `${prefixOf(name)}${keyOf(files)}.mjs`);
  return existsSync(path) ? path : undefined;
}

/** Each of the project's modules keeps its own `import.meta.url`, `dirname` and `filename` inside the bundle. */
const ownImportMeta = {
  name: 'own-import-meta',
  setup(build) {
    build.onLoad({ filter: /\.(ts|mts|js|mjs)$/ }, async (args) => {
      if (!args.path.startsWith(SRC)) return undefined;
      const text = await readFile(args.path, 'utf8');
      if (!text.includes('import.meta.')) return undefined;
      const contents = text
        .replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href))
        .replaceAll('import.meta.dirname', JSON.stringify(dirname(args.path)))
        .replaceAll('import.meta.filename', JSON.stringify(args.path));
      return { contents, loader: /\.m?ts$/.test(args.path) ? 'ts' : 'js' };
    });
  },
};

/** Builds bundle `name` into `dir` (written under a temporary name, then renamed: concurrent starts never see half a file). */
async function build(name, dir) {
  const { build: esbuild } = await import('esbuild');
  const { entry, packages } = BUNDLES[name];
  const result = await esbuild({
    entryPoints: [join(REPO, entry)],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: `node${process.versions.node.split('.')[0]}`,
    write: false,
    metafile: true,
    logLevel: 'silent',
    // Smaller to parse at every start.
    minify: packages === 'bundle',
    // The service's stack traces name the sources' files and lines: a map beside the bundle (read at start only when
    // Node's source maps are on, as runService turns them on).
    // (The output path only places the map's source paths, relative to the cache directory; nothing is written there.)
    ...(packages === 'external' ? { packages: 'external', plugins: [ownImportMeta], sourcemap: 'external', outfile: join(dir, `${prefixOf(name)}build.mjs`) } : {}),
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
  const prefix = prefixOf(name);
  const path = join(dir, `${prefix}${key}.mjs`);
  const code = result.outputFiles.find((f) => !f.path.endsWith('.map'));
  const map = result.outputFiles.find((f) => f.path.endsWith('.map'));
  if (map) {
    const mapPart = `${path}.map.${process.pid}.tmp`;
    writeFileSync(mapPart, map.contents);
    renameSync(mapPart, `${path}.map`);
  }
  const part = `${path}.${process.pid}.tmp`;
  writeFileSync(part, map ? `${code.text}\n//# sourceMappingURL=${basename(path)}.map\n` : code.contents);
  renameSync(part, path);
  const inputsPart = join(dir, `${prefix}inputs.json.${process.pid}.tmp`);
  writeFileSync(inputsPart, JSON.stringify({ files }));
  renameSync(inputsPart, join(dir, `${prefix}inputs.json`));
  // Earlier bundles are of sources that have changed since: they would never be used again.
  for (const file of readdirSync(dir)) {
    if (file.startsWith(prefix) && (file.endsWith('.mjs') || file.endsWith('.mjs.map')) && !join(dir, file).startsWith(path)) rmSync(join(dir, file), { force: true });
  }
  return path;
}

/**
 * The path of bundle `name` (`pay` or `service`): the current one, built first when there is none; undefined when
 * none can be built or kept (esbuild missing, nowhere writable), and the caller runs the TypeScript source.
 */
export async function bundlePath(name) {
  for (const dir of cacheDirs(name)) {
    const found = currentBundle(name, dir);
    if (found) return found;
  }
  for (const dir of cacheDirs(name)) {
    try {
      return await build(name, dir);
    } catch {
      // Next place, then the source.
    }
  }
  return undefined;
}

/** Runs the TypeScript source through tsx: where no bundle could be made. */
export async function importSource(entry) {
  const { register } = await import('tsx/esm/api');
  register();
  return import(pathToFileURL(join(REPO, entry)).href);
}

/** The pay command's module: from its bundle, or from the source. */
export async function loadPayCommand() {
  const path = await bundlePath('pay');
  return path ? { how: 'bundle', path, module: await import(pathToFileURL(path).href) } : { how: 'source', path: BUNDLES.pay.entry, module: await importSource(BUNDLES.pay.entry) };
}

/** Runs a service command (`start`, `gateway`, ...): from its bundle, or from the source. */
export async function runService() {
  const path = await bundlePath('service');
  process.setSourceMapsEnabled(true);
  await (path ? import(pathToFileURL(path).href) : importSource(BUNDLES.service.entry));
}
