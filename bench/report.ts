/**
 * Where a bench script's figures go: the JSON file `--out` names (bench/run.ts adds the machine, the command and
 * the goals, see results.ts), or stdout when the script runs on its own.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

export function writeFigures(out: string | undefined, figures: Record<string, unknown>): void {
  if (out === undefined) {
    process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
    return;
  }
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(figures, null, 2)}\n`);
}

const started = performance.now();

/** A progress line on stderr, with the seconds since the script started. */
export function progress(line: string): void {
  process.stderr.write(`[${((performance.now() - started) / 1000).toFixed(1)} s] ${line}\n`);
}
