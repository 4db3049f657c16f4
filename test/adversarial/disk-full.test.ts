/**
 * A full disk: LMDB cannot write. The real gateway runs with a file-size limit (RLIMIT_FSIZE, `ulimit -f`, with
 * SIGXFSZ ignored so that a write past it fails with EFBIG as on a full disk) just above its data file's size, and
 * is made to write until a commit fails. It must go on running, say so on /health (503), and keep what was
 * written before: a write that failed leaves nothing behind.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { openSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { CAIP2 } from '../../src/chain/canonical.ts';
import { registrationTypedData } from '../../src/gateway/merchants/signature.ts';
import { freePort, freshAccount, network, testDevnet, TEST_MANIFEST_PATH } from '../helpers/devnet.ts';
import { BIN } from '../helpers/spawn-devnet.ts';
import { spawnFacilitator } from '../helpers/spawn-facilitator.ts';
import { gassedKey } from '../helpers/stock.ts';
import { tempDir } from '../helpers/temp-dir.ts';

const n = network(testDevnet(), CAIP2.stockChain);
const dataDir = tempDir('disk-full');
const env = { GATE402_RELAYER_KEYS: await gassedKey(n) };

// A first run writes the data file (the built-in catalog); its size sets the limit of the second.
const first = await spawnFacilitator({ part: 'gateway', manifestPath: TEST_MANIFEST_PATH, dataDir, env });
await first.stop();
const limitKiB = Math.ceil(statSync(join(dataDir, 'data.mdb')).size / 1024) + 128;

const port = await freePort();
const url = `http://127.0.0.1:${port}`;
const logPath = join(dataDir, 'full.log');
const child = spawn('bash', ['-c', `trap "" XFSZ; ulimit -f ${limitKiB}; exec "$0" "$@"`, process.execPath, BIN, 'gateway', '--manifest', TEST_MANIFEST_PATH], {
  stdio: ['ignore', openSync(logPath, 'a'), openSync(logPath, 'a')],
  env: { ...process.env, ...env, GATE402_GATEWAY_PORT: String(port), GATE402_DATA_DIR: dataDir, GATE402_LOG_LEVEL: 'warn', GATE402_STOCK_ENABLED: 'false', GATE402_MERCHANT_MAX_TEXT_BYTES: '262144' },
});
const exited = new Promise((r) => child.once('exit', r));
t.teardown(async () => {
  if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGKILL');
    await exited;
  }
  rmSync(dataDir, { recursive: true, force: true });
});
for (;;) {
  if (child.exitCode !== null) throw new Error(`the gateway exited ${child.exitCode}:\n${readFileSync(logPath, 'utf8')}`);
  if (
    await fetch(`${url}/health`).then(
      (r) => r.ok,
      () => false,
    )
  )
    break;
  await new Promise((r) => setTimeout(r, 100));
}

/** A registration of about 80 KB (20 routes with long descriptions, over the default text bound, raised above), to fill the data file quickly. */
async function registerLarge(): Promise<{ status: number; slug: string; text: string }> {
  const owner = freshAccount();
  const long = 'A long description to fill the disk. '.repeat(50).slice(0, 1900);
  const registration = {
    action: 'register' as const,
    slug: `full-${owner.address.slice(2, 12).toLowerCase()}`,
    name: 'Disk filler',
    description: long,
    payTo: owner.address,
    networks: [CAIP2.stockChain],
    upstream: { kind: 'url' as const, baseUrl: 'https://93.184.216.34/v1', secretHeaders: {} },
    routes: Array.from({ length: 20 }, (_, i) => ({ route: `r${i}`, methods: ['GET' as const], priceUsd: '0.010000', summary: 'Filler', description: long, input: long })),
    nonce: `n-${Math.random()}`,
    issuedAt: Math.floor(Date.now() / 1000),
  };
  const signature = await owner.signTypedData(registrationTypedData(registration as never));
  const res = await fetch(`${url}/api/merchants`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ registration, signature }) });
  return { status: res.status, slug: registration.slug, text: await res.text() };
}

t.test('when the disk is full the gateway stays up, says it is unhealthy, and keeps what it wrote before', async (t) => {
  const stored: string[] = [];
  let failed: { status: number; slug: string; text: string } | undefined;
  for (let i = 0; i < 15 && failed === undefined; i++) {
    const r = await registerLarge();
    if (r.status === 201 || r.status === 200) stored.push(r.slug);
    else failed = r;
  }
  t.ok(failed, 'a registration failed once the data file could not grow');
  t.ok((failed?.status ?? 0) >= 500, `with a server error, not the client's (${failed?.status} ${failed?.text})`);
  await new Promise((r) => setTimeout(r, 500));
  t.equal(child.exitCode, null, 'the process is still running');
  t.equal(child.signalCode, null);
  const health = await fetch(`${url}/health`);
  t.equal(health.status, 503, 'and /health says it is unhealthy');
  t.match(await health.json(), { ok: false, store: { ok: false } });
  t.equal((await fetch(`${url}/api/merchants/${failed?.slug}`)).status, 404, 'the failed registration left nothing');
  for (const slug of stored) t.equal((await fetch(`${url}/api/merchants/${slug}`)).status, 200, `${slug}, written before, is still there`);
  t.equal((await fetch(`${url}/m/catjoke/joke`)).status, 402, 'buyers are still answered');
  t.notMatch(readFileSync(logPath, 'utf8'), /Unhandled|unhandled/, 'no unhandled rejection');
});
