import type { ChildProcess } from 'node:child_process';

/** How a node is started, and how patiently it is started again. */
export interface NodeSupervisorOptions {
  /** The node's name, for the log lines. */
  name: string;
  /** Starts a run of the node; rejects when it could not (counted as an exit). */
  start(): ChildProcess | Promise<ChildProcess>;
  /** Told of each exit and restart, one line each. */
  log(line: string): void;
  /** The first wait before a restart (default 1 s). */
  firstBackoffMs?: number;
  /** The longest wait before a restart (default 30 s). */
  maxBackoffMs?: number;
  /** A run that stayed up this long starts the backoff over (default 60 s). */
  steadyMs?: number;
}

/**
 * Keeps one cluster node running: started again whenever it exits (unless it is being stopped), after a backoff that
 * doubles from `firstBackoffMs` up to `maxBackoffMs` and starts over once a run stayed up `steadyMs`.
 *
 * Why a node is restarted from outside rather than mending itself: a node that loses its leases (the database away
 * for most of a lease term, a pause past it) exits at once, because fencing asks that it stop signing and sending
 * before its next write, and the one way to drop at once everything it holds in memory (payment and order actors,
 * signed transactions not yet sent, relayer nonces, serving claims, cached answers) is to end the process. Its next
 * run joins with a new lease epoch and resumes its unfinished records from the store, as after a crash; while the
 * database is still away that run fails to open the store and exits, and is tried again after the backoff. This is
 * what `gate402 cluster` does for its nodes, and what an operator's supervisor must do (docs/operations-and-cluster.md).
 */
export class NodeSupervisor {
  readonly #o: NodeSupervisorOptions;
  #child: ChildProcess | undefined;
  #backoffMs: number;
  #timer: NodeJS.Timeout | undefined;
  #stopping = false;
  #runs = 0;

  constructor(options: NodeSupervisorOptions) {
    this.#o = options;
    this.#backoffMs = options.firstBackoffMs ?? 1000;
    void this.#run();
  }

  /** The node's current run, if one is up. */
  get child(): ChildProcess | undefined {
    return this.#child;
  }

  /** Runs started so far (the first included). */
  get runs(): number {
    return this.#runs;
  }

  async #run(): Promise<void> {
    if (this.#stopping) return;
    const startedAt = performance.now();
    this.#runs += 1;
    let child: ChildProcess;
    try {
      child = await this.#o.start();
    } catch (error) {
      this.#o.log(`${this.#o.name} could not start: ${error instanceof Error ? error.message : String(error)}`);
      return this.#later(startedAt);
    }
    if (this.#stopping) {
      child.kill('SIGTERM');
      return;
    }
    this.#child = child;
    const exited = (code: number | null, signal: NodeJS.Signals | null) => {
      if (this.#child === child) this.#child = undefined;
      if (this.#stopping) return;
      this.#o.log(`${this.#o.name} exited (${signal ?? code})`);
      this.#later(startedAt);
    };
    if (child.exitCode !== null || child.signalCode !== null) exited(child.exitCode, child.signalCode);
    else child.once('exit', exited);
  }

  #later(startedAt: number): void {
    if (this.#stopping) return;
    if (performance.now() - startedAt >= (this.#o.steadyMs ?? 60_000)) this.#backoffMs = this.#o.firstBackoffMs ?? 1000;
    const waitMs = this.#backoffMs;
    this.#backoffMs = Math.min(this.#o.maxBackoffMs ?? 30_000, waitMs * 2);
    this.#o.log(`${this.#o.name} starts again in ${waitMs} ms`);
    this.#timer = setTimeout(() => void this.#run(), waitMs);
  }

  /** Stops restarting it, and stops its current run (SIGTERM), resolving once it exited. */
  async stop(): Promise<void> {
    this.#stopping = true;
    clearTimeout(this.#timer);
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((done) => {
      child.once('exit', () => done());
      child.kill('SIGTERM');
    });
  }
}
