/**
 * Loaded into every test process and the `before`/`after` scripts (tap's `node-arg`): how the processes of a test run
 * start. A run starts well over a hundred gateways, facilitators and devnets besides its test files, and the machine
 * it runs on is busy: what each start costs in CPU is what the run waits for.
 */
import module from 'node:module';
import { resolve } from 'node:path';

interface SpawnOptions {
  env: NodeJS.ProcessEnv;
}

/**
 * V8's code cache on disk (Node 22.1+; older Nodes ignore it): a process after the first compiles none of the
 * JavaScript it loads again (viem, the x402 and MPP clients, ajv, the product's own modules).
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

/**
 * A test file runs in a process of its own without tap's module hooks. tap starts each test file with
 * @tapjs/processinfo's `--import` (and @tapjs/mock's, but that plugin is off: no test mocks modules, and the process
 * tap starts took 0.7-0.8 s to get here with it, 0.3-0.4 s without, a job slot idle meanwhile), which register module
 * loader hooks; with them, loading what a chain test imports (viem, the x402 and MPP clients, the product's modules)
 * took 5.5-6.6 CPU s instead of 2.2-3.1 (side by side, Node 22; coverage off as here), and the suite starts over a
 * hundred test files. So the process tap starts (this one, before the test file loads) runs the same file again in a child
 * without them, and is only its go-between: the child writes its TAP stream to the same stdout, tap's messages (a
 * test's own timeout, tap's timeout notice) are passed along both ways, tap's signals are passed on, and this process
 * ends as the child did. The child dies with this process even if it is killed (setpriv, where it is there).
 */
const HOOKS = /@tapjs[\\/](processinfo|mock)[\\/]/;
const RERUN = 'GATE402_TEST_WITHOUT_TAP_HOOKS';
if (process.env.TAP_CHILD_ID !== undefined && process.send !== undefined && process.env[RERUN] === undefined && process.execArgv.some((a) => HOOKS.test(a))) {
  const { spawn } = await import('node:child_process');
  const { existsSync } = await import('node:fs');
  const args = [...process.execArgv.filter((a) => !HOOKS.test(a)), ...process.argv.slice(1)];
  const setpriv = process.platform === 'linux' && existsSync('/usr/bin/setpriv');
  const env = { ...withoutProcessInfo(process.env), [RERUN]: '1' };
  const child = setpriv
    ? spawn('/usr/bin/setpriv', ['--pdeathsig', 'KILL', process.execPath, ...args], { stdio: ['inherit', 'inherit', 'inherit', 'ipc'], env })
    : spawn(process.execPath, args, { stdio: ['inherit', 'inherit', 'inherit', 'ipc'], env });
  process.on('message', (msg) => child.send(msg as never, () => {}));
  child.on('message', (msg) => process.send?.(msg));
  for (const signal of ['SIGALRM', 'SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => child.kill(signal));
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolveExit) => child.once('exit', (c, s) => resolveExit([c, s])));
  if (signal !== null) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  }
  process.exit(code ?? 1);
}
