// `npm run statecharts`: writes statecharts/<name>.json and statecharts/<name>.md for every charted machine.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { statechartFiles } from './export.ts';
import { CHARTED_MACHINES } from './machines.ts';

export const STATECHARTS_DIR = resolve(import.meta.dirname, '../../statecharts');

if (import.meta.filename === process.argv[1]) {
  mkdirSync(STATECHARTS_DIR, { recursive: true });
  for (const chart of CHARTED_MACHINES) {
    for (const [file, text] of Object.entries(statechartFiles(chart))) {
      writeFileSync(join(STATECHARTS_DIR, file), text);
      process.stdout.write(`statecharts/${file}\n`);
    }
  }
}
