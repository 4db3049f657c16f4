/**
 * Off the devnet (networks from GATE402_NETWORKS_FILE), the service never runs on keys anyone can derive from the
 * public test mnemonic: without its own relayer keys, gateway key, MPP secret and stock desk key (for the parts that
 * run) it refuses to start, with one line naming the variable, a non-zero exit, no port bound and nothing written.
 */
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { CAIP2 } from '../../src/chain/canonical.ts';
import { DEVNET_ROLES, devnetPrivateKey } from '../../src/devnet/accounts.ts';
import { freePort, testDevnet } from '../helpers/devnet.ts';
import { listening } from '../helpers/raw-http.ts';
import { BIN, offDevnetEnv } from '../helpers/spawn-devnet.ts';
import { tempDir } from '../helpers/temp-dir.ts';

const manifest = testDevnet();
const dir = tempDir('startup-secrets');
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const networksFile = join(dir, 'networks.json');
writeFileSync(networksFile, JSON.stringify({ networks: manifest.networks }));
t.ok(manifest.networks[CAIP2.stockChain]?.stocks?.length, 'the networks file lists stocks, so the stock desk would run');

const ownKey = () => generatePrivateKey();
const strongSecret = 'an operator secret of well over thirty-two bytes';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  port: number;
  dataDir: string;
  listening: boolean;
}

/** Runs `gate402 <part>` off the devnet with only the given settings, until it exits (or 60 s). */
async function run(part: 'facilitator' | 'gateway', settings: Record<string, string>): Promise<Run> {
  const port = await freePort();
  const dataDir = join(mkdtempSync(join(dir, 'run-')), 'data');
  const env = offDevnetEnv({
    GATE402_NETWORKS_FILE: networksFile,
    GATE402_DATA_DIR: dataDir,
    GATE402_FACILITATOR_PORT: String(port),
    GATE402_GATEWAY_PORT: String(port),
    GATE402_LOG_LEVEL: 'warn',
    ...settings,
  });
  const child = spawn(process.execPath, [BIN, part], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const code = await exited;
  clearTimeout(timer);
  return { code, stdout, stderr, port, dataDir, listening: await listening(port) };
}

/** The refusal a victim operator would see: one line naming the variable, a non-zero exit, nothing started. */
function refused(t: Test, r: Run, variable: string): void {
  const lines = r.stderr.split('\n').filter((l) => l.trim() !== '');
  t.not(r.code, 0, `exits non-zero (${r.code})`);
  t.equal(lines.length, 1, `one line on stderr: ${JSON.stringify(r.stderr)}`);
  t.match(lines[0] ?? '', variable, `the line names ${variable}`);
  t.equal(r.stdout, '', 'nothing on stdout (no listening address announced)');
  t.notOk(r.listening, 'no port is listening');
  t.notOk(existsSync(r.dataDir), 'no store was opened');
}

t.test('the facilitator refuses to start without relayer keys', async (t) => {
  refused(t, await run('facilitator', {}), 'GATE402_RELAYER_KEYS');
});

t.test('the facilitator refuses relayer keys of the public test mnemonic', async (t) => {
  refused(t, await run('facilitator', { GATE402_RELAYER_KEYS: `${ownKey()},${devnetPrivateKey(DEVNET_ROLES.relayers[0])}` }), 'GATE402_RELAYER_KEYS');
  refused(t, await run('facilitator', { GATE402_RELAYER_KEYS: devnetPrivateKey(0) }), 'GATE402_RELAYER_KEYS');
});

t.test('the gateway refuses to start without its key, its MPP secret or the stock desk key', async (t) => {
  const relayers = { GATE402_RELAYER_KEYS: ownKey() };
  refused(t, await run('gateway', {}), 'GATE402_RELAYER_KEYS');
  refused(t, await run('gateway', { ...relayers, GATE402_MPP_SECRET: strongSecret }), 'GATE402_GATEWAY_KEY');
  refused(t, await run('gateway', { ...relayers, GATE402_GATEWAY_KEY: devnetPrivateKey(60), GATE402_MPP_SECRET: strongSecret }), 'GATE402_GATEWAY_KEY');
  refused(t, await run('gateway', { ...relayers, GATE402_GATEWAY_KEY: ownKey() }), 'GATE402_MPP_SECRET');
  refused(t, await run('gateway', { ...relayers, GATE402_GATEWAY_KEY: ownKey(), GATE402_MPP_SECRET: 'x'.repeat(31) }), 'GATE402_MPP_SECRET');
  refused(t, await run('gateway', { ...relayers, GATE402_GATEWAY_KEY: ownKey(), GATE402_MPP_SECRET: strongSecret }), 'GATE402_STOCK_DESK_KEY');
  refused(
    t,
    await run('gateway', { ...relayers, GATE402_GATEWAY_KEY: ownKey(), GATE402_MPP_SECRET: strongSecret, GATE402_STOCK_DESK_KEY: devnetPrivateKey(DEVNET_ROLES.stockDesk) }),
    'GATE402_STOCK_DESK_KEY',
  );
});

t.test("the facilitator refuses to start off the devnet without each network's native coin price (the price floor)", async (t) => {
  refused(t, await run('facilitator', { GATE402_RELAYER_KEYS: ownKey() }), 'GATE402_NATIVE_USD_EIP155_');
});

t.test('with keys of its own, the facilitator starts off the devnet and names only its own relayers', async (t) => {
  const port = await freePort();
  const key = ownKey();
  const env = offDevnetEnv({
    GATE402_NETWORKS_FILE: networksFile,
    GATE402_DATA_DIR: join(mkdtempSync(join(dir, 'ok-')), 'data'),
    GATE402_FACILITATOR_PORT: String(port),
    GATE402_LOG_LEVEL: 'error',
    GATE402_RELAYER_KEYS: key,
    GATE402_NATIVE_USD_EIP155_8453: '1',
    GATE402_NATIVE_USD_EIP155_84532: '1',
    GATE402_NATIVE_USD_EIP155_4663: '1',
  });
  const child = spawn(process.execPath, [BIN, 'facilitator'], { env, stdio: 'ignore' });
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  let supported: { signers?: Record<string, string[]> } | undefined;
  const deadline = Date.now() + 60_000;
  while (!supported && child.exitCode === null && Date.now() < deadline) {
    supported = await fetch(`http://127.0.0.1:${port}/supported`).then(
      (r) => (r.ok ? (r.json() as Promise<typeof supported>) : undefined),
      () => undefined,
    );
    if (!supported) await new Promise((r) => setTimeout(r, 200));
  }
  t.same(supported?.signers?.['eip155:*'], [privateKeyToAccount(key).address], 'the only signer is the configured relayer');
  child.kill('SIGTERM');
});
