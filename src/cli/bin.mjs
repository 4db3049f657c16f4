#!/usr/bin/env node
// The `gate402` command. TypeScript runs directly through tsx's loader: there is no build step to forget.
// `pay` is a buyer's one-shot call: it starts from a bundle made (and remade) on demand instead (see pay-bundle.mjs).
import { unsupportedNodeMessage } from './node-support.mjs';

// On a Node.js it does not run on, one line naming the supported versions instead of a native module's stack trace.
const unsupported = unsupportedNodeMessage(process.version);
if (unsupported) {
  process.stderr.write(`${unsupported}\n`);
  process.exit(1);
}
const [command, ...rest] = process.argv.slice(2);
if (command === 'pay') {
  const { loadPayCommand } = await import('./pay-bundle.mjs');
  const { module } = await loadPayCommand();
  await module.runPayCommand(rest).catch((err) => {
    process.stderr.write(`gate402: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(2);
  });
  process.exit(process.exitCode ?? 0);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('./main.ts');
}
