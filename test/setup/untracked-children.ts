/**
 * Loaded into every test process and the `before`/`after` scripts (tap's `node-arg`): the processes a test starts
 * (gateways, facilitators, devnets, the CLI) run without tap's process tracking.
 *
 * tap puts @tapjs/processinfo's loader into NODE_OPTIONS of every child of a test (through process-on-spawn), to
 * record which files each process loads, for coverage and `--changed`. The suite runs with coverage off and never
 * with `--changed`, yet in each child the loader hooks every module it loads: a `gate402 gateway` took about 5.9-6.9
 * CPU seconds to become healthy with it and 3.0-4.2 s without (side by side, Node 22), and a run starts well over
 * a hundred gateways, facilitators and devnets. The `before` script's child, the shared devnet, also ran with V8's
 * precise coverage on. This listener runs after processinfo's on every spawn and takes its loader and settings out of
 * the child's environment again; anything else in NODE_OPTIONS (a test's own `--import`) stays.
 */
interface SpawnOptions {
  env: NodeJS.ProcessEnv;
}

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
