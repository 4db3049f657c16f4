import { positiveNumber } from './flags.ts';

/**
 * A guard for unattended runs (tests, CI): after `seconds`, the process exits whatever it is doing. Armed before
 * anything starts, so a hung start cannot outlive it either; chains die with the process (see src/devnet/anvil.ts).
 */
export function armExitAfter(seconds: string | undefined): void {
  if (seconds === undefined) return;
  const ms = positiveNumber(seconds, '--exit-after') * 1000;
  setTimeout(() => {
    process.stderr.write(`gate402: --exit-after ${seconds}s reached\n`);
    process.kill(process.pid, 'SIGTERM');
  }, ms).unref();
}

/** Runs `stop` once on Ctrl-C, SIGTERM or SIGHUP, then exits. Everything the command started goes down with it. */
export function stopOnSignal(stop: () => Promise<void>): void {
  let stopping = false;
  const shutdown = (why: string): void => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`gate402: ${why}, stopping\n`);
    stop().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`gate402: stop failed: ${(err as Error).message}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => shutdown('interrupted'));
  process.on('SIGTERM', () => shutdown('terminated'));
  process.on('SIGHUP', () => shutdown('hung up'));
  // Stay alive until a signal: the chains are child processes, which do not hold the event loop.
  setInterval(() => {}, 1 << 30);
}
