import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A fresh directory under os.tmpdir() named `gate402-{prefix}-…`. The test removes it on teardown; should the test
 * file end before its teardowns run (an uncaught throw, a top-level await that rejects), it is removed as this
 * process exits.
 */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), `gate402-${prefix}-`));
  onExit(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * Signals `child` if it is still running when this process exits, so that no service outlives the test that started
 * it. SIGTERM lets a devnet stop its anvils itself (anvil removes its state directory only when it stops cleanly).
 */
export function killOnExit(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): void {
  onExit(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  });
}

// One process 'exit' listener for every hook (one per hook would trip Node's listener-count warning in long files).
const hooks: Array<() => void> = [];
function onExit(hook: () => void): void {
  if (hooks.length === 0) {
    process.once('exit', () => {
      // Children first: a dead child writes no more into the directories removed after it.
      for (const h of hooks.reverse()) {
        try {
          h();
        } catch {
          // best effort at exit: the next hook still runs
        }
      }
    });
  }
  hooks.push(hook);
}

/** SIGTERM to `pid`, and SIGKILL if it is still there after `graceMs`; resolves once it is gone. */
export async function stopProcess(pid: number, graceMs = 10_000): Promise<void> {
  try {
    process.kill(pid, 'SIGTERM');
    const deadline = Date.now() + graceMs;
    for (;;) {
      process.kill(pid, 0);
      if (Date.now() > deadline) {
        process.kill(pid, 'SIGKILL');
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  } catch {
    // already gone
  }
}
