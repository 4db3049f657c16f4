/**
 * Loaded into every test process and the `before`/`after` scripts (tap's `node-arg`): how the processes of a test run
 * start. A run starts well over a hundred gateways, facilitators and devnets besides its 114 test files, and the
 * machine it runs on is busy: what each start costs in CPU is what the run waits for.
 */
import module from 'node:module';
import { resolve } from 'node:path';

interface SpawnOptions {
  env: NodeJS.ProcessEnv;
}

/**
 * V8's code cache on disk (Node 22.1+; older Nodes ignore it): a process after the first compiles none of the
 * JavaScript it loads again (viem, the x402 and MPP clients, ajv, the product's own modules as tsx emits them).
 * Measured side by side, `gate402 gateway` up to healthy: 2.7-3.6 CPU s with the cache, 3.6-4.2 s without.
 */
process.env.NODE_COMPILE_CACHE ??= resolve('.tap/compile-cache');
// (not in @types/node 20, which the product's types follow)
(module as { enableCompileCache?: (dir: string) => unknown }).enableCompileCache?.(process.env.NODE_COMPILE_CACHE);

/**
 * The processes a test starts run without tap's process tracking. tap puts @tapjs/processinfo's loader into
 * NODE_OPTIONS of every child of a test (through process-on-spawn), to record which files each process loads, for
 * coverage and `--changed`. The suite runs with coverage off and never with `--changed`, yet in each child the loader
 * hooks every module it loads: a `gate402 gateway` took 5.9-6.9 CPU s to become healthy with it and 3.0-4.2 s
 * without (side by side, Node 22). The `before` script's child, the shared devnet, also ran with V8's precise
 * coverage on. This listener runs after processinfo's on every spawn and takes its loader and settings out of the
 * child's environment again; anything else in NODE_OPTIONS (a test's own `--import`) stays.
 */
const PROCESSINFO = /@tapjs[\\/]processinfo[\\/]/;
/** One NODE_OPTIONS argument: quoted (as processinfo writes it) or bare. */
const ARGUMENT = /"(?:[^"\\]|\\.)*"|\S+/g;

export function withoutProcessInfo(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const kept: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) if (!name.startsWith('_TAPJS_PROCESSINFO_')) kept[name] = value;
  const options = (env.NODE_OPTIONS ?? '').match(ARGUMENT) ?? [];
  const rest = options.filter((arg) => !PROCESSINFO.test(arg));
  if (rest.length > 0) kept.NODE_OPTIONS = rest.join(' ');
  else delete kept.NODE_OPTIONS;
  return kept;
}

// process-on-spawn keeps its listeners on this global (one list however many copies of it are loaded).
const spawnHooks = (globalThis as Record<symbol, { listeners: Array<(opts: SpawnOptions) => void> } | undefined>)[Symbol.for('process-on-spawn@*:singletonId')];
spawnHooks?.listeners.push((opts) => {
  opts.env = withoutProcessInfo(opts.env);
});
