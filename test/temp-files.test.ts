// Tests remove what they write outside the repository: a service started through the test helpers leaves nothing in
// the temporary directory once it is stopped, nor once the test file that started it dies before its teardowns.
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { resolve } from 'node:path';
import { generatePrivateKey } from 'viem/accounts';
import { TEST_MANIFEST_PATH } from './helpers/devnet.ts';
import { spawnFacilitator } from './helpers/spawn-facilitator.ts';

/** A temporary directory of this test's own, made the process's TMPDIR (os.tmpdir() reads it at every call). */
function privateTmp(t: Test): string {
  const dir = mkdtempSync(`${tmpdir()}/gate402-temp-files-`);
  const before = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  t.teardown(() => {
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/**
 * What is in `dir` but tsx's compile cache (`tsx-{uid}`: one per user, reused by every later run, as /tmp/tsx-0 is
 * outside this test).
 */
const leftovers = (dir: string) => readdirSync(dir).filter((name) => !/^tsx-\d+$/.test(name));

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

t.test('a facilitator started by the helper leaves no directory behind once stopped', async (t) => {
  const tmp = privateTmp(t);
  const fac = await spawnFacilitator({ manifestPath: TEST_MANIFEST_PATH, env: { GATE402_RELAYER_KEYS: generatePrivateKey() } });
  t.equal(fac.dataDir.startsWith(tmp), true, 'its data directory is made in the temporary directory');
  t.same(leftovers(tmp).length, 1, 'while it runs, its data directory exists');
  t.equal((await fetch(`${fac.url}/supported`)).status, 200, 'it serves');
  await fac.stop();
  t.same(leftovers(tmp), [], 'after stop, the temporary directory is as it was');
});

t.test('a test file that dies before its teardowns still removes its directory and stops its facilitator', async (t) => {
  const tmp = privateTmp(t);
  const child = spawn(process.execPath, ['--import', 'tsx', resolve('test/fixtures/abandoned-facilitator.ts')], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TMPDIR: tmp } });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  t.not(code, 0, 'the file failed');
  const started = JSON.parse(out.split('\n')[0] as string) as { pid: number; dataDir: string };
  t.equal(started.dataDir.startsWith(tmp), true, 'it had made its data directory in the temporary directory');
  t.equal(existsSync(started.dataDir), false, 'its data directory is gone');
  t.same(leftovers(tmp), [], 'nothing is left in the temporary directory');
  const deadline = Date.now() + 10_000;
  while (alive(started.pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  t.equal(alive(started.pid), false, 'its facilitator does not outlive it');
});
