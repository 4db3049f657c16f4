/**
 * Disk that comes back (issue 21, finding 5). Uploaded merchant files are counted by the merchants that use them and
 * removed when none does; one wallet, and the gateway as a whole, have an upload budget refused with a 413 that names
 * it; a crash's leftovers are swept at start; and payments refused by simulation (an empty wallet's) leave no record
 * behind. Measured as an attacker would notice it: bytes on disk (fs.stat over the files directory, the LMDB file's
 * size) and records in the store, over real sockets, a real LMDB and the real facilitator on the devnet.
 */
import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { CAIP2 } from '../../src/chain/canonical.ts';
import type { PaymentRecord } from '../../src/engine/payment-record.ts';
import { FileReferences } from '../../src/gateway/merchants/file-references.ts';
import { mountMerchantRoutes } from '../../src/gateway/merchants/http.ts';
import type { MerchantRecord } from '../../src/gateway/merchants/merchant-records.ts';
import { MERCHANTS_COLLECTION, MerchantRegistry } from '../../src/gateway/merchants/registry.ts';
import type { UploadBudgets } from '../../src/gateway/merchants/uploads.ts';
import { registrationTypedData } from '../../src/gateway/merchants/signature.ts';
import type { Registration } from '../../src/gateway/merchants/types.ts';
import { registrationBodyLimit } from '../../src/gateway/merchants/validate.ts';
import { createHttpServer } from '../../src/http/server.ts';
import { openLmdbStore } from '../../src/store/lmdb/open-lmdb-store.ts';
import { openPostgresStore } from '../../src/store/postgres/open-postgres-store.ts';
import { freshAccount, network, testDevnet, TEST_MANIFEST_PATH } from '../helpers/devnet.ts';
import { officialPayment, postJson, requirementsFor } from '../helpers/payments.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { spawnFacilitator } from '../helpers/spawn-facilitator.ts';
import { tempDir } from '../helpers/temp-dir.ts';

const MiB = 1024 * 1024;
const NOW = Date.now();
const NETWORKS = new Set<string>([CAIP2.base]);

/** Bytes the files in `dir` take (fs.stat of each entry; a missing directory is empty). */
function bytesIn(dir: string): number {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return 0;
  }
  return names.reduce((sum, n) => sum + statSync(join(dir, n)).size, 0);
}

/** The content address of the file `slug` serves. */
async function shaOf(registry: MerchantRegistry, slug: string): Promise<string> {
  const upstream = (await registry.get(slug))?.upstream;
  if (upstream?.kind !== 'file') throw new Error(`${slug} serves no file`);
  return upstream.sha256;
}

let nonces = 0;
function registration(account: PrivateKeyAccount, slug: string, action: Registration['action'], content?: Uint8Array): Registration {
  return {
    action,
    slug,
    name: `Files ${slug}`,
    description: 'A file.',
    payTo: account.address,
    networks: [CAIP2.base],
    upstream: content
      ? { kind: 'file', fileName: `${slug}.bin`, contentType: 'application/octet-stream', contentBase64: Buffer.from(content).toString('base64') }
      : { kind: 'url', baseUrl: 'http://127.0.0.1:9/x', secretHeaders: {} },
    routes: [{ route: 'get', methods: ['GET'], priceUsd: '0.010000', summary: 'The file', description: '', input: '' }],
    nonce: `disk-${++nonces}-${randomBytes(6).toString('hex')}`,
    issuedAt: Math.floor(NOW / 1000),
  } as Registration;
}

/** A registry on a fresh LMDB store and files directory, behind a real uWS server. */
async function gateway(t: Test, budgets: Partial<UploadBudgets> = {}) {
  const dir = tempDir('disk');
  const store = openLmdbStore(join(dir, 'db'));
  const filesDir = join(dir, 'merchant-files');
  const registry = new MerchantRegistry({ store, networks: { has: (n) => NETWORKS.has(n) }, filesDir, upstreamAllowlist: ['127.0.0.1'], uploadBudgets: budgets });
  const server = createHttpServer({ host: '127.0.0.1', port: 0, maxBodyBytes: registrationBodyLimit(registry.limits.maxFileBytes), log: () => {} });
  mountMerchantRoutes(server, { registry, now: () => NOW });
  const port = await server.listen();
  t.teardown(async () => {
    await server.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const post = async (account: PrivateKeyAccount, slug: string, action: Registration['action'], content?: Uint8Array) => {
    const reg = registration(account, slug, action, content);
    const signature = await account.signTypedData(registrationTypedData(reg));
    const res = await fetch(`http://127.0.0.1:${port}/api/merchants`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ registration: reg, signature }) });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  return { dir, store, filesDir, registry, post };
}

t.test('one wallet uploads files of several MiB and deletes its merchants: the directory is back to its size', async (t) => {
  const g = await gateway(t);
  const wallet = privateKeyToAccount(generatePrivateKey());
  const before = bytesIn(g.filesDir);
  const files = Array.from({ length: 4 }, () => randomBytes(3 * MiB));
  for (const [i, f] of files.entries()) t.equal((await g.post(wallet, `dump-${i}`, 'register', f)).status, 201, `upload ${i} of 3 MiB`);
  t.equal(bytesIn(g.filesDir) - before, 12 * MiB, '12 MiB on disk');
  t.equal(await g.registry.uploadBytesOf(wallet.address), 12 * MiB, 'charged to the wallet');
  // One merchant updated to another file: the file it left is removed at once; updated to a URL, likewise.
  const replacement = randomBytes(2 * MiB);
  t.equal((await g.post(wallet, 'dump-0', 'update', replacement)).status, 200);
  t.equal(bytesIn(g.filesDir) - before, 11 * MiB, 'an update that replaces a file removes the old one');
  t.equal((await g.post(wallet, 'dump-1', 'update')).status, 200);
  t.equal(bytesIn(g.filesDir) - before, 8 * MiB, 'an update to a URL upstream removes its file');
  for (let i = 0; i < files.length; i++) t.equal((await g.post(wallet, `dump-${i}`, 'delete')).status, 200, `delete ${i}`);
  t.equal(bytesIn(g.filesDir), before, 'every byte came back');
  t.same(readdirSync(g.filesDir), [], 'no file, no temporary file left');
  t.equal(await g.registry.uploadBytesOf(wallet.address), 0, 'nothing charged to the wallet any more');
});

t.test('two merchants share one identical file: it stays until the last one is deleted', async (t) => {
  const g = await gateway(t);
  const [a, b] = [privateKeyToAccount(generatePrivateKey()), privateKeyToAccount(generatePrivateKey())];
  const content = randomBytes(MiB);
  const first = await g.post(a, 'shared-a', 'register', content);
  const second = await g.post(b, 'shared-b', 'register', content);
  t.same([first.status, second.status], [201, 201]);
  const sha = await shaOf(g.registry, 'shared-a');
  t.same(readdirSync(g.filesDir), [sha], 'stored once');
  t.equal(await new FileReferences(g.store).count(sha), 2, 'counted twice');
  // Updating one merchant to the same file again keeps it (and its count).
  t.equal((await g.post(a, 'shared-a', 'update', content)).status, 200);
  t.equal(await new FileReferences(g.store).count(sha), 2, 'an update to the same file keeps one reference');
  t.equal((await g.post(a, 'shared-a', 'delete')).status, 200);
  t.same(readdirSync(g.filesDir), [sha], 'deleting one merchant keeps the file the other uses');
  t.same(Buffer.from((await g.registry.readMerchantFile(sha)) ?? []), content, 'and it still serves its bytes');
  t.ok(await g.registry.delete('shared-b'), 'the operator deletes the other');
  t.same(readdirSync(g.filesDir), [], 'deleting both removes it');
  t.equal(await new FileReferences(g.store).count(sha), 0);
});

t.test('the per-wallet and the total upload budgets refuse with a 413 that names the budget, storing nothing', async (t) => {
  const g = await gateway(t, { walletBytes: 5 * MiB, totalBytes: 8 * MiB });
  const [greedy, second, third] = [0, 1, 2].map(() => privateKeyToAccount(generatePrivateKey())) as [PrivateKeyAccount, PrivateKeyAccount, PrivateKeyAccount];
  t.equal((await g.post(greedy, 'g-1', 'register', randomBytes(2 * MiB))).status, 201);
  t.equal((await g.post(greedy, 'g-2', 'register', randomBytes(2 * MiB))).status, 201);
  const onDisk = bytesIn(g.filesDir);
  const over = await g.post(greedy, 'g-3', 'register', randomBytes(2 * MiB));
  t.equal(over.status, 413, 'a third 2 MiB file is over the 5 MiB of the wallet');
  t.equal(over.body.budget, 'wallet');
  t.match(over.body.error, /per-wallet budget of 5242880 bytes/);
  t.equal(bytesIn(g.filesDir), onDisk, 'nothing stored');
  t.equal(await g.registry.get('g-3'), undefined, 'no merchant');
  // The same wallet may replace a file within its budget (the replaced file does not count).
  t.equal((await g.post(greedy, 'g-2', 'update', randomBytes(3 * MiB))).status, 200, 'a replacement counts instead of the file it replaces');
  t.equal((await g.post(second, 's-1', 'register', randomBytes(2 * MiB))).status, 201, '7 MiB in all');
  const full = await g.post(third, 't-1', 'register', randomBytes(2 * MiB));
  t.equal(full.status, 413, 'another 2 MiB would be over the 8 MiB of the gateway');
  t.equal(full.body.budget, 'total');
  t.match(full.body.error, /over its budget of 8388608 bytes/);
  t.equal(bytesIn(g.filesDir), 7 * MiB, 'nothing stored');
  // A file already stored costs the gateway nothing more: another merchant may use it.
  const shared = await g.post(third, 't-2', 'register', Buffer.from((await g.registry.readMerchantFile(await shaOf(g.registry, 's-1'))) ?? []));
  t.equal(shared.status, 201, 'a file already on disk is not refused by the total budget');
  t.equal(bytesIn(g.filesDir), 7 * MiB);
});

t.test('what a crash leaves is swept at start: unreferenced files, stale temporary files; a live file without a reference gains one', async (t) => {
  const g = await gateway(t);
  const wallet = privateKeyToAccount(generatePrivateKey());
  const kept = randomBytes(MiB);
  const dropped = randomBytes(MiB);
  t.equal((await g.post(wallet, 'kept', 'register', kept)).status, 201);
  const reg = await g.post(wallet, 'dropped', 'register', dropped);
  t.equal(reg.status, 201);
  const droppedSha = await shaOf(g.registry, 'dropped');
  const keptSha = await shaOf(g.registry, 'kept');
  // A crash right after a delete's record write: the tombstone is durable, the reference and the file are not gone.
  const merchants = g.store.collection<MerchantRecord>(MERCHANTS_COLLECTION);
  const record = await merchants.get('dropped');
  await merchants.put('dropped', { merchant: null, builtin: false, nonces: record?.nonces ?? [] });
  // A registry from before file references: a live merchant's file without one.
  await new FileReferences(g.store).drop(keptSha, 'kept');
  // A write cut short: a temporary file.
  writeFileSync(join(g.filesDir, '.tmp-0123456789abcdef-0011223344556677'), randomBytes(1000));
  t.equal(bytesIn(g.filesDir), 2 * MiB + 1000);

  // The next start (a registry on the same store and directory).
  const restarted = new MerchantRegistry({ store: g.store, networks: { has: (n) => NETWORKS.has(n) }, filesDir: g.filesDir });
  const report = await restarted.sweepFiles();
  t.same(report, { removedFiles: 2, removedBytes: MiB + 1000, droppedReferences: 1, addedReferences: 1 }, 'swept');
  t.same(readdirSync(g.filesDir), [keptSha], 'only the live file is left');
  t.equal(await new FileReferences(g.store).count(droppedSha), 0);
  t.equal(await new FileReferences(g.store).count(keptSha), 1, "the live file's reference is back");
  t.same(await restarted.sweepFiles(), { removedFiles: 0, removedBytes: 0, droppedReferences: 0, addedReferences: 0 }, 'a second sweep finds nothing');
  // Gateways sharing a store keep a grace period: a young reference (a registration under way elsewhere) stays.
  const shared = new MerchantRegistry({ store: g.store, networks: { has: (n) => NETWORKS.has(n) }, filesDir: g.filesDir, written: async () => {} });
  await new FileReferences(g.store).hold(droppedSha, { slug: 'under-way', owner: wallet.address, size: MiB, at: Date.now() });
  t.same((await shared.sweepFiles()).droppedReferences, 0, 'a young reference without its merchant is kept in a cluster');
  t.same((await restarted.sweepFiles()).droppedReferences, 1, 'alone, it is dropped at once');
});

t.test('gateways sharing a PostgreSQL store and a files directory: a file one deletes while another takes it stays', async (t) => {
  const db = await startPostgres();
  const dir = tempDir('disk-cluster');
  const [storeA, storeB] = await Promise.all([openPostgresStore(db.url, { poolSize: 2 }), openPostgresStore(db.url, { poolSize: 2 })]);
  t.teardown(async () => {
    await Promise.all([storeA.close(), storeB.close()]);
    await db.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const filesDir = join(dir, 'merchant-files');
  const node = (store: typeof storeA) => new MerchantRegistry({ store, networks: { has: (n) => NETWORKS.has(n) }, filesDir, upstreamAllowlist: ['127.0.0.1'], written: async () => {} });
  const [a, b] = [node(storeA), node(storeB)];
  const [wa, wb] = [privateKeyToAccount(generatePrivateKey()), privateKeyToAccount(generatePrivateKey())];
  const send = async (registry: MerchantRegistry, account: PrivateKeyAccount, slug: string, action: Registration['action'], content?: Uint8Array) => {
    const reg = registration(account, slug, action, content);
    return registry.register({ registration: reg, signature: await account.signTypedData(registrationTypedData(reg)) }, NOW);
  };
  const content = randomBytes(256 * 1024);
  for (let round = 0; round < 8; round++) {
    t.match(await send(a, wa, `a-${round}`, 'register', content), { ok: true });
    // One node lets the file go while the other takes it: whichever order the writes land in, the file stays.
    const [deleted, taken] = await Promise.all([send(a, wa, `a-${round}`, 'delete'), send(b, wb, `b-${round}`, 'register', content)]);
    t.match([deleted, taken], [{ ok: true }, { ok: true }], `round ${round}`);
    t.same(Buffer.from((await b.readMerchantFile(await shaOf(b, `b-${round}`))) ?? []), content, `round ${round}: the file the other node took is on disk`);
    t.match(await send(b, wb, `b-${round}`, 'delete'), { ok: true });
    t.same(readdirSync(filesDir), [], `round ${round}: gone once neither uses it`);
  }
});

t.test('payments refused by simulation (an empty wallet) leave no record: two floods, the store does not grow', async (t) => {
  const manifest = testDevnet();
  const base = network(manifest, CAIP2.base);
  const fac = await spawnFacilitator({
    manifestPath: TEST_MANIFEST_PATH,
    env: {
      GATE402_FACILITATOR_RATE_CAPACITY: '1000000',
      GATE402_FACILITATOR_RATE_PER_SECOND: '1000000',
      GATE402_FACILITATOR_PAYER_RATE_CAPACITY: '1000000',
      GATE402_FACILITATOR_PAYER_RATE_PER_SECOND: '1000000',
      GATE402_RELAYER_WATCH_MS: '3600000',
    },
  });
  t.teardown(() => fac.stop());
  const empty = freshAccount();
  const payTo = freshAccount().address;
  const PER_FLOOD = 150;
  const BALANCE = '200 false invalid_exact_evm_insufficient_balance';
  const SHED = '503 undefined undefined';
  const CONCURRENCY = 16;

  const flood = async (): Promise<Record<string, number>> => {
    const bodies = await Promise.all(
      Array.from({ length: PER_FLOOD }, async () => {
        const req = requirementsFor(CAIP2.base, base, payTo, '10000');
        return { x402Version: 2, paymentPayload: await officialPayment(empty, req), paymentRequirements: req };
      }),
    );
    const answers: Record<string, number> = {};
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < bodies.length) {
          const a = await postJson(`${fac.url}/settle`, bodies[next++]);
          const json = a.json as { success?: boolean; errorReason?: string };
          const key = `${a.status} ${json.success} ${json.errorReason}`;
          answers[key] = (answers[key] ?? 0) + 1;
        }
      }),
    );
    return answers;
  };
  /** Payment records in the facilitator's store and the size of its LMDB file (read beside the running process). */
  const measure = async (): Promise<{ records: number; failed: number; bytes: number }> => {
    const store = openLmdbStore(fac.dataDir);
    try {
      let records = 0;
      let failed = 0;
      for await (const [, r] of store.collection<PaymentRecord>('payments').entries()) {
        records++;
        if (r.state === 'failed') failed++;
      }
      return { records, failed, bytes: statSync(join(fac.dataDir, 'data.mdb')).size };
    } finally {
      await store.close();
    }
  };

  /** Once the last answers' final writes (removals) are done: the count as it settles. */
  const settled = async (): Promise<{ records: number; failed: number; bytes: number }> => {
    let m = await measure();
    for (let i = 0; i < 50 && m.records > start.records; i++) {
      await new Promise((r) => setTimeout(r, 100));
      m = await measure();
    }
    return m;
  };
  const refusedAlike = (answers: Record<string, number>, what: string) => {
    const { [BALANCE]: refused = 0, [SHED]: shed = 0, ...other } = answers;
    t.same(other, {}, `${what}: every payment refused for its balance, or turned away by backpressure (${JSON.stringify(answers)})`);
    t.ok(refused >= PER_FLOOD / 2, `${what}: ${refused} of ${PER_FLOOD} went as far as simulation (${shed} turned away before)`);
  };

  const start = await measure();
  refusedAlike(await flood(), 'first flood');
  const afterFirst = await settled();
  refusedAlike(await flood(), 'second flood');
  const afterSecond = await settled();
  t.comment(`data.mdb: ${start.bytes} bytes at start, ${afterFirst.bytes} after ${PER_FLOOD}, ${afterSecond.bytes} after ${2 * PER_FLOOD} refused payments`);
  t.equal(afterFirst.records, start.records, 'no payment record left by the first flood');
  t.equal(afterSecond.records, start.records, 'none by the second');
  t.equal(afterSecond.failed, 0, 'no failed record kept');
  // A kept record took about 3 KB (300 refused payments grew data.mdb by 0.9 MB a flood when they were kept): the
  // second flood reuses the pages the first one freed, give or take a few pages of LMDB's own.
  const growth = afterSecond.bytes - afterFirst.bytes;
  t.ok(growth <= Math.max(afterFirst.bytes - start.bytes, 0), `the second flood grew data.mdb no more than the first (${afterFirst.bytes - start.bytes} then ${growth} bytes)`);
  t.ok(growth <= 64 * 1024, `the second flood grew data.mdb by at most 64 KiB (${growth} bytes for ${PER_FLOOD} payments)`);
});
