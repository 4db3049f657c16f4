/**
 * A `serving` claim is bounded in time: when its insert commits but the client gives up (a timeout), the credential
 * is not blocked until the node restarts. Real LMDB claims; the timeout is the store's answer lost after the commit.
 */
import t from 'tap';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { BOOT } from '../src/cluster/boot.ts';
import { claimForServing, markServed, servedState } from '../src/gateway/paywall/served-claims.ts';
import type { NonceClaims } from '../src/store/nonce-claims.ts';
import { openLmdbStore } from '../src/store/lmdb/open-lmdb-store.ts';
import { tempDir } from './helpers/temp-dir.ts';

const dir = tempDir('served-bound');
const store = openLmdbStore(join(dir, 'db'));
t.teardown(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Claims whose first claim commits, then fails as a client timeout would: the row is there, the caller never knows. */
function losingFirstAnswer(inner: NonceClaims): NonceClaims {
  let lost = false;
  return {
    claim: async (key, holder, within) => {
      const r = await inner.claim(key, holder, within);
      if (!lost) {
        lost = true;
        throw new Error('Query read timeout');
      }
      return r;
    },
    release: (k, h) => inner.release(k, h),
    takeover: (k, f, to) => inner.takeover(k, f, to),
    holder: (k) => inner.holder(k),
  };
}

t.test('a serving claim whose insert committed while its client timed out frees the credential once its bound passes', async (t) => {
  const served = store.claims('served');
  const claims = losingFirstAnswer(served);
  const key = 'payment-1';
  const start = 1_800_000_000_000;
  await t.rejects(claimForServing(claims, key, undefined, { boundMs: 75_000, now: start }), /timeout/, 'the claim committed, the client gave up');
  const holder = await served.holder(key);
  t.match(holder, new RegExp(`^serving ${BOOT} \\S+ ${start + 75_000}$`), 'the claim names this run and its bound');
  t.equal(await servedState(holder, undefined, start + 1000), 'serving', 'within its bound, the credential is being served (not served twice)');
  t.equal(await claimForServing(claims, key, undefined, { boundMs: 75_000, now: start + 74_000 }), undefined, 'and another request for it is refused');
  t.equal(await servedState(holder, undefined, start + 75_001), 'free', 'past its bound it is free, although this run is live');
  const again = await claimForServing(claims, key, undefined, { boundMs: 75_000, now: start + 75_001 });
  t.ok(again, 'the same credential is claimed again (taken over), without a restart');
  t.ok(again && (await markServed(claims, again)), 'served');
  t.equal(await servedState(await served.holder(key), undefined, start + 10 ** 9), 'served', 'and served is forever');
});

t.test('a claim written without a bound keeps the liveness rule alone', async (t) => {
  const served = store.claims('served-old');
  await served.claim('k', `serving ${BOOT} some-id`);
  t.equal(await servedState(await served.holder('k'), undefined, Date.now() + 10 ** 12), 'serving', 'this run is live: still serving');
  await served.claim('k2', 'serving another-boot some-id');
  t.equal(await servedState(await served.holder('k2')), 'free', 'a run no longer live: free');
});
