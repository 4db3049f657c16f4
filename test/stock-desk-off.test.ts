/**
 * Off the devnet, a networks file whose stock chain lists no stocks is a gateway without a stock desk, not a crash:
 * it starts with no desk key, says in its log why the desk is off, serves its marketplace, and has no stock API.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { generatePrivateKey } from 'viem/accounts';
import { CAIP2 } from '../src/chain/canonical.ts';
import { freePort, testDevnet } from './helpers/devnet.ts';
import { BIN, offDevnetEnv } from './helpers/spawn-devnet.ts';

const manifest = testDevnet();
const dir = mkdtempSync(join(tmpdir(), 'gate402-stock-desk-off-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const { stocks: _stocks, uniswap: _uniswap, ...stockChain } = manifest.networks[CAIP2.stockChain] ?? {};
const networksFile = join(dir, 'networks.json');
writeFileSync(networksFile, JSON.stringify({ networks: { ...manifest.networks, [CAIP2.stockChain]: stockChain } }));

const port = await freePort();
const env = offDevnetEnv({
  GATE402_NETWORKS_FILE: networksFile,
  GATE402_DATA_DIR: join(dir, 'data'),
  GATE402_GATEWAY_PORT: String(port),
  GATE402_RELAYER_KEYS: generatePrivateKey(),
  GATE402_GATEWAY_KEY: generatePrivateKey(),
  GATE402_MPP_SECRET: 'an operator secret of well over thirty-two bytes',
  GATE402_WEB_ENABLED: 'false',
  // Off the devnet each network's native coin price is required (the price floor).
  GATE402_NATIVE_USD_EIP155_8453: '1',
  GATE402_NATIVE_USD_EIP155_84532: '1',
  GATE402_NATIVE_USD_EIP155_4663: '1',
});
const child = spawn(process.execPath, [BIN, 'gateway'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
let stderr = '';
child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
t.teardown(async () => {
  if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGTERM');
    await exited;
  }
});

const url = `http://127.0.0.1:${port}`;
let health: { ok?: boolean } | undefined;
const deadline = Date.now() + 60_000;
while (!health && child.exitCode === null && Date.now() < deadline) {
  health = await fetch(`${url}/health`).then(
    (r) => (r.ok ? (r.json() as Promise<{ ok?: boolean }>) : undefined),
    () => undefined,
  );
  if (!health) await new Promise((r) => setTimeout(r, 200));
}

t.test('the gateway starts without a desk key and says why the desk is off', async (t) => {
  t.equal(child.exitCode, null, `still running (stderr: ${stderr.slice(0, 500)})`);
  t.equal(health?.ok, true, '/health is ok');
  const off = stderr.split('\n').filter((l) => l.includes('stock desk off'));
  t.equal(off.length, 1, 'one log line says the stock desk is off');
  t.match(off[0] ?? '', CAIP2.stockChain, 'and names the stock chain');
});

t.test('the marketplace serves, the stock API does not exist', async (t) => {
  const openapi = (await fetch(`${url}/openapi.json`).then((r) => r.json())) as { openapi?: string };
  t.equal(openapi.openapi, '3.1.0');
  for (const path of ['/api/stock/list', '/api/stock/quote?symbol=TSLA&stable_amount=10']) t.equal((await fetch(`${url}${path}`)).status, 404, `${path} is not found`);
});
