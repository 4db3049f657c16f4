// The store says its own kind, and the composition root measures it by that kind: each durable write of LMDB and of
// PostgreSQL lands in `gate402_store_commit_duration_seconds{store=...}`, which exists at zero from the first scrape.
import t from 'tap';
import { rmSync } from 'node:fs';
import { composeStore } from '../src/cli/compose-store.ts';
import { createMetrics } from '../src/metrics/metrics.ts';
import { storeConfigFromEnv } from '../src/store/store-config.ts';
import { parseExposition, valueOf as sampleValue } from './helpers/prometheus.ts';
import { startPostgres } from './helpers/postgres.ts';
import { tempDir } from './helpers/temp-dir.ts';

const db = await startPostgres();
t.teardown(() => db.stop());

const commits = async (metrics: ReturnType<typeof createMetrics>, store: string) =>
  sampleValue(parseExposition((await metrics.scrape()).body), 'gate402_store_commit_duration_seconds_count', { store });

for (const kind of ['lmdb', 'postgres'] as const) {
  t.test(`${kind}: the store's kind labels its commits`, async (t) => {
    const dir = tempDir('store-kind');
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const env = kind === 'postgres' ? { GATE402_STORE_URL: await db.server.createDatabase(`kind_${Date.now()}`) } : {};
    const metrics = createMetrics({ defaultMetrics: false });
    const store = await composeStore(storeConfigFromEnv(env, dir), metrics);
    t.teardown(() => store.close());
    t.equal(store.kind, kind, 'the store says which it is');
    t.equal(await commits(metrics, kind), 0, 'at zero before the first write');
    t.equal(await commits(metrics, kind === 'lmdb' ? 'postgres' : 'lmdb'), undefined, 'no series for the other kind');
    await store.collection<{ n: number }>('things').put('a', { n: 1 });
    await store.nonces.claim('k', 'payment-1');
    t.ok(((await commits(metrics, kind)) ?? 0) >= 2, 'each durable write measured under its kind');
    const text = (await metrics.scrape()).body;
    t.notMatch(text, /gate402_lmdb_commit_duration_seconds/, 'the old, LMDB-only name is gone');
  });
}
