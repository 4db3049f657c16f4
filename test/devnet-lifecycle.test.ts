import t, { type Test } from 'tap';
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { rpcCall } from '../src/chain/rpc.ts';
import { BIN, spawnDevnet, type SpawnedDevnet } from './helpers/spawn-devnet.ts';
import { tempDir } from './helpers/temp-dir.ts';

const run = promisify(execFile);

/** Processes whose parent is `pid`, read from /proc. */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) === pid) out.push(Number(entry));
    } catch {
      // exited while we looked
    }
  }
  return out;
}

function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

async function until(cond: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return true;
}

async function chainsAnswer(d: SpawnedDevnet): Promise<boolean[]> {
  return Promise.all(
    Object.values(d.manifest.networks).map((n) =>
      rpcCall(n.rpcUrl, 'eth_chainId', [], 500).then(
        () => true,
        () => false,
      ),
    ),
  );
}

// A directory of this file's own run: two runs of the suite side by side do not share manifests.
const dir = tempDir('lifecycle');
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

/** A test that fails before its own kill leaves no devnet behind. */
function killAtTeardown(t: Test, d: SpawnedDevnet): void {
  t.teardown(() => {
    if (d.child.exitCode === null && d.child.signalCode === null) d.child.kill('SIGKILL');
  });
}

t.test('devnet starts in under a minute, tolerates a second start, and SIGTERM leaves no anvil behind', async (t) => {
  const started = Date.now();
  const d = await spawnDevnet(join(dir, 'term.json'));
  killAtTeardown(t, d);
  t.ok(Date.now() - started < 60_000, `up in ${Date.now() - started} ms`);
  const anvils = childrenOf(d.child.pid as number);
  t.equal(anvils.length, 3, 'three chains run under it');
  t.same(await chainsAnswer(d), [true, true, true]);

  const again = await run(process.execPath, [BIN, 'devnet', '--manifest', d.manifestPath], { timeout: 60_000 });
  t.match(again.stdout, /already running/, 'a second start reuses the running chains instead of failing');

  d.child.kill('SIGTERM');
  await new Promise((r) => d.child.once('exit', r));
  t.ok(await until(() => anvils.every((p) => !running(p)), 5000), 'no anvil process survives');
  t.same(await chainsAnswer(d), [false, false, false], 'the ports are closed');
});

t.test('SIGKILL of the devnet leaves no anvil behind', async (t) => {
  const d = await spawnDevnet(join(dir, 'kill.json'));
  killAtTeardown(t, d);
  const anvils = childrenOf(d.child.pid as number);
  t.equal(anvils.length, 3);
  d.child.kill('SIGKILL');
  t.ok(await until(() => anvils.every((p) => !running(p)), 5000), 'the kernel stops the chains with their parent');
});
