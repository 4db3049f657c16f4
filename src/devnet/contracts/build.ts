// Compiles src/devnet/contracts/sol and writes src/devnet/contracts/artifacts. Run with `npm run build:contracts`.
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ARTIFACTS_DIR, compileContracts, compilerVersion, renderArtifactFiles } from './compile.ts';

async function main(): Promise<void> {
  let warnings = 0;
  const compiled = await compileContracts({
    onWarning: (message) => {
      warnings += 1;
      process.stderr.write(`${message}\n`);
    },
  });
  const files = renderArtifactFiles(compiled);

  await mkdir(ARTIFACTS_DIR, { recursive: true });
  // Generated modules of contracts that no longer exist would otherwise linger.
  for (const existing of await readdir(ARTIFACTS_DIR)) {
    if (existing.endsWith('.ts') && !files.has(existing)) {
      await rm(join(ARTIFACTS_DIR, existing));
      process.stdout.write(`removed artifacts/${existing}\n`);
    }
  }

  for (const [file, text] of files) {
    const path = join(ARTIFACTS_DIR, file);
    const previous = await readFile(path, 'utf8').catch(() => undefined);
    if (previous === text) continue;
    await writeFile(path, text);
    process.stdout.write(`wrote artifacts/${file}\n`);
  }
  process.stdout.write(`${files.size} artifact modules up to date (solc ${compilerVersion()}, ${warnings} warning(s))\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
