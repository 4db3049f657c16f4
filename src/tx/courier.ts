import type { Chain, PublicClient, TransactionReceipt, Transport } from 'viem';
import { BlockWatcher } from './block-watcher.ts';
import type { ReorgGuard } from './reorg-guard.ts';
import type { Logger } from '../log/logger.ts';
import { ok, type Err, type Failure, type Ok } from '../protocol/result.ts';
import type { RelayerPool } from './relayer-pool.ts';
import { callOf, type RelayerCall, type SignedTx } from './trail.ts';

/**
 * Carries one logical transaction (a settlement, a swap, a refund) from signature to receipt without ever losing
 * or doubling it: every signed version is handed to `persist` before it is sent, so after a crash the same bytes
 * go out again and nothing is signed anew by mistake. The trail (`txs`) is every version signed; the last is
 * current.
 */
export interface Courier {
  pool: RelayerPool;
  client: PublicClient<Transport, Chain>;
  /** How often the chain head is read while a transaction is awaited. */
  pollMs: number;
  log: Logger;
  /** The chain's block watcher; without one, couriers of the same client share one made for it. */
  watcher?: BlockWatcher;
  /** The chain's reorg guard: a mined transaction is handed to it, to be sent again if a reorg drops it. */
  reorgs?: ReorgGuard;
}

export type Persist = (txs: SignedTx[]) => Promise<void>;
/** Why a signed call was not sent: the node refused it, or no nonce of the relayer was accepted. `txs`: the trail as it stands. */
export interface NotSent extends Failure<'node_refused' | 'nonce_not_accepted'> {
  txs: SignedTx[];
}
/** The trail with the version sent last, or why nothing was sent. */
export type SendOutcome = Ok<SignedTx[]> | Err<NotSent>;
export interface Mined {
  receipt: TransactionReceipt;
  tx: SignedTx;
  txs: SignedTx[];
}

/** Waits `ms`, or less if `signal` aborts; leaves no listener behind either way. */
export const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });

/** Signs `call`, persists the grown trail, and only then sends it. A nonce the node calls used is re-read and tried again. */
export async function sendDurably(c: Courier, call: RelayerCall, txs: SignedTx[], persist: Persist): Promise<SendOutcome> {
  let trail = txs;
  for (let attempt = 0; attempt < 3; attempt++) {
    const tx = await c.pool.sign(call);
    const next = [...trail, tx];
    try {
      await persist(next);
    } catch (err) {
      c.pool.abandon(tx); // never sent: its nonce goes back, so the relayer's queue has no gap
      throw err;
    }
    trail = next;
    const outcome = await c.pool.broadcast(tx);
    if (outcome === 'sent' || outcome === 'known') return ok(trail);
    if (outcome === 'nonce_too_low') {
      // Our own send may have taken the nonce: its answer was lost and the transport's retry met it mined. Then it
      // is the transaction to follow, and signing the call again would send it twice.
      if (
        await c.client.getTransaction({ hash: tx.hash }).then(
          () => true,
          () => false,
        )
      )
        return ok(trail);
      c.pool.done(tx);
      await c.pool.resync(tx.relayer);
      continue;
    }
    // An answer lost on the way (a timeout) is no refusal: a transaction the node holds will mine.
    if (
      outcome === 'rejected' &&
      (await c.client.getTransaction({ hash: tx.hash }).then(
        () => true,
        () => false,
      ))
    )
      return ok(trail);
    c.pool.abandon(tx);
    return { ok: false, error: { code: 'node_refused', message: `the node refused the transaction (${outcome})`, txs: trail } };
  }
  return { ok: false, error: { code: 'nonce_not_accepted', message: 'no relayer nonce was accepted', txs: trail } };
}

/** How long a transaction may go unmined before its fee and its presence at the node are checked. */
const KEEP_IN_FLIGHT_MS = 2000;

const sharedWatchers = new WeakMap<object, BlockWatcher>();

/** The courier's block watcher, or the one shared by every courier of its client. */
function watcherOf(c: Courier): BlockWatcher {
  if (c.watcher) return c.watcher;
  let watcher = sharedWatchers.get(c.client);
  if (!watcher) {
    watcher = new BlockWatcher({ client: c.client, pollMs: c.pollMs, timeoutMs: 10_000, log: c.log });
    sharedWatchers.set(c.client, watcher);
  }
  return watcher;
}

/**
 * Waits for a receipt of any version of the trail, from the chain's block watcher. Every few seconds without one,
 * a version priced out by the base fee is replaced (same nonce, higher fee), and one the node forgot is sent again as
 * it was. Never gives up on RPC errors; stops only when `signal` aborts (or the watcher stops).
 */
export async function awaitMined(c: Courier, txs: SignedTx[], persist: Persist, signal: AbortSignal): Promise<Mined> {
  const watcher = watcherOf(c);
  const keepInFlightMs = Math.max(KEEP_IN_FLIGHT_MS, c.pollMs * 10);
  let trail = txs;
  while (!signal.aborted && !watcher.stopped) {
    const receipt = await watcher.receipt(
      trail.map((tx) => tx.hash),
      { signal, waitMs: keepInFlightMs },
    );
    if (receipt) {
      const tx = trail.find((t) => t.hash.toLowerCase() === receipt.transactionHash.toLowerCase()) as SignedTx;
      c.pool.done(trail.at(-1) as SignedTx);
      // Not awaited: the caller's own record of the receipt is not held back by it (a crash before it is durable
      // resumes this wait, which hands the receipt over again).
      c.reorgs?.watch(tx, receipt, `call to ${tx.to}`).catch((err: unknown) => c.log.warn('could not watch a mined transaction for reorgs', { tx: tx.hash, error: err }));
      return { receipt, tx, txs: trail };
    }
    if (signal.aborted || watcher.stopped) break;
    try {
      trail = await keepInFlight(c, trail, persist);
    } catch (err) {
      c.log.warn('could not check a transaction in flight', { tx: trail.at(-1)?.hash, error: err });
    }
  }
  throw new Error('stopped while the transaction was in flight');
}

/** Sends the current version again after a restart: 'known' when it had reached the node. */
export async function resend(c: Pick<Courier, 'pool'>, txs: SignedTx[]): Promise<void> {
  const tx = txs.at(-1);
  if (tx) await c.pool.broadcast(tx);
}

/** The receipt of whichever version mined; a successful one wins over a reverted one. */
async function minedVersion(client: Courier['client'], txs: SignedTx[]): Promise<{ receipt: TransactionReceipt; tx: SignedTx } | undefined> {
  const receipts = await Promise.all(
    txs.map((tx) =>
      client.getTransactionReceipt({ hash: tx.hash }).then(
        (receipt) => ({ receipt, tx }),
        () => undefined,
      ),
    ),
  );
  const mined = receipts.filter((r): r is { receipt: TransactionReceipt; tx: SignedTx } => r !== undefined);
  return mined.find((m) => m.receipt.status === 'success') ?? mined[0];
}

/** Re-prices a transaction the base fee has outgrown, and re-sends one the node no longer knows. */
async function keepInFlight(c: Courier, txs: SignedTx[], persist: Persist): Promise<SignedTx[]> {
  const tx = txs.at(-1) as SignedTx;
  const block = await c.client.getBlock({ blockTag: 'latest' });
  const baseFee = block.baseFeePerGas ?? 0n;
  if (baseFee > BigInt(tx.maxFeePerGas)) return replace(c, txs, tx, baseFee, persist);
  const seen = await c.client.getTransaction({ hash: tx.hash }).then(
    () => true,
    () => false,
  );
  if (seen) return txs;
  const outcome = await c.pool.broadcast(tx);
  if (outcome === 'underpriced') return replace(c, txs, tx, baseFee, persist);
  if (outcome === 'nonce_too_low' && !(await minedVersion(c.client, txs))) return resubmit(c, txs, persist, 'its nonce was taken');
  return txs;
}

async function replace(c: Courier, txs: SignedTx[], tx: SignedTx, baseFee: bigint, persist: Persist): Promise<SignedTx[]> {
  const bumped = await c.pool.bump(tx, baseFee);
  const next = [...txs, bumped];
  await persist(next);
  const outcome = await c.pool.broadcast(bumped);
  c.log.warn('replaced an underpriced transaction', { from: tx.hash, to: bumped.hash, maxFeePerGas: bumped.maxFeePerGas, outcome });
  return next;
}

/** None of the versions mined and the nonce went to something else: sign the same call with a new nonce. */
async function resubmit(c: Courier, txs: SignedTx[], persist: Persist, why: string): Promise<SignedTx[]> {
  const last = txs.at(-1) as SignedTx;
  c.pool.done(last);
  await c.pool.resync(last.relayer);
  const tx = await c.pool.sign(callOf(last));
  const next = [...txs, tx];
  await persist(next);
  await c.pool.broadcast(tx);
  c.log.warn('re-sent a transaction', { why, tx: tx.hash });
  return next;
}
