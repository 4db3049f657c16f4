#!/usr/bin/env node
// The `gate402` command. It starts from an esbuild bundle of its TypeScript, made (and remade) on demand when its
// sources change, so there is no build step to forget; where none can be made, the source runs through tsx (bundle.mjs).
import { unsupportedNodeMessage } from './node-support.mjs';

// On a Node.js it does not run on, one line naming the supported versions instead of a native module's stack trace.
const unsupported = unsupportedNodeMessage(process.version);
if (unsupported) {
  process.stderr.write(`${unsupported}\n`);
  process.exit(1);
}
const [command, ...rest] = process.argv.slice(2);
if (command === 'pay') {
  const { loadPayCommand } = await import('./bundle.mjs');
  const { module } = await loadPayCommand();
  await module.runPayCommand(rest).catch((err) => {
    process.stderr.write(`gate402: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(2);
  });
  process.exit(process.exitCode ?? 0);
} else {
  const { runService } = await import('./bundle.mjs');
  await runService();
}
