/**
 * The web front end's scripts and stylesheet, bundled in memory by esbuild from `client/` (nothing is written to
 * disk, nothing is built ahead of time): one self-contained script per page, and the stylesheet they share. (Shared
 * chunks cost more than they save here: with code splitting, viem's lazily imported modules drag 88 KB into a chunk
 * every page would load; without it, the largest page script is about 35 KB.) Every output is named by its content
 * hash, so it may be cached for ever.
 */
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';

export const CLIENT_DIR = fileURLToPath(new URL('./client/', import.meta.url));

export const PAGES = ['stock', 'market', 'merchant'] as const;
export type PageName = (typeof PAGES)[number];

/** A file as the gateway serves it: its bytes, gzipped when that is smaller, and its strong validator. */
export interface StaticFile {
  contentType: string;
  body: Uint8Array;
  gzip?: Uint8Array;
  etag: string;
}

export interface PageAssets {
  /** `/assets/...` of the page's module script and of the stylesheet. */
  script: string;
  style: string;
}

export interface ClientBundle {
  /** By file name (the part after `/assets/`). */
  assets: ReadonlyMap<string, StaticFile>;
  pages: Readonly<Record<PageName, PageAssets>>;
  /** Total bytes (uncompressed) and build time, for the log. */
  bytes: number;
  ms: number;
}

const TYPES: Readonly<Record<string, string>> = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8' };

export function staticFile(contentType: string, body: Uint8Array): StaticFile {
  const gzip = gzipSync(body, { level: 9 });
  return {
    contentType,
    body,
    ...(gzip.byteLength < body.byteLength ? { gzip: new Uint8Array(gzip.buffer, gzip.byteOffset, gzip.byteLength) } : {}),
    etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
  };
}

export async function bundleClient(): Promise<ClientBundle> {
  const started = performance.now();
  const result = await build({
    absWorkingDir: CLIENT_DIR,
    entryPoints: [...PAGES.map((p) => `${p}.ts`), 'style.css'],
    tsconfig: 'tsconfig.json',
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['es2022', 'chrome111', 'firefox115', 'safari16'],
    minify: true,
    legalComments: 'none',
    charset: 'utf8',
    outdir: 'out',
    entryNames: '[name]-[hash]',
    write: false,
    metafile: true,
    logLevel: 'silent',
  });
  const assets = new Map<string, StaticFile>();
  let bytes = 0;
  for (const f of result.outputFiles) {
    const name = f.path.slice(f.path.lastIndexOf('/') + 1);
    const type = TYPES[name.slice(name.lastIndexOf('.') + 1)];
    if (!type) throw new Error(`the web bundle produced ${name}, of no known type`);
    assets.set(name, staticFile(type, f.contents));
    bytes += f.contents.byteLength;
  }
  const outputs = Object.entries(result.metafile.outputs);
  const fileOf = (path: string) => path.slice(path.lastIndexOf('/') + 1);
  const entry = (source: string) => {
    const found = outputs.find(([, o]) => o.entryPoint === source);
    if (!found) throw new Error(`the web bundle has no output for ${source}`);
    return found;
  };
  const [stylePath] = entry('style.css');
  const pages = Object.fromEntries(
    PAGES.map((p) => {
      const [path] = entry(`${p}.ts`);
      return [p, { script: `/assets/${fileOf(path)}`, style: `/assets/${fileOf(stylePath)}` }];
    }),
  ) as Record<PageName, PageAssets>;
  return { assets, pages, bytes, ms: Math.round(performance.now() - started) };
}
