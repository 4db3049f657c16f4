import type { DurableCollection } from '../store/durable-collection.ts';
import { resend } from '../tx/courier.ts';
import type { SignedTx } from '../tx/trail.ts';
import type { EngineOptions } from './engine-options.ts';
import type { PaymentActor, PaymentHost } from './payment-intake.ts';
import { currentTxOf, isFinished, type BatchRecord, type PaymentRecord } from './payment-record.ts';
import type { BatchActor, SettlementBatcher } from './settlement-batcher.ts';

export interface RecoveryDeps {
  options: Pick<EngineOptions, 'networks' | 'relayers' | 'log' | 'node'>;
  records: DurableCollection<PaymentRecord>;
  batches: DurableCollection<BatchRecord>;
  host: PaymentHost;
  batcher: SettlementBatcher;
  /** Starts a payment's actor (a batch member with the batch actor carrying its transaction). */
  spawn(record: PaymentRecord, batch?: BatchActor): PaymentActor;
}

/**
 * Recovery: the unfinished payments of the store are resumed on start (this node's, in a cluster) and those of a dead
 * cluster node adopted, their transactions already signed sent again as they were (a batch transaction once for all
 * its members), never signed anew, and each batch carried to its receipt once for all of them.
 */
export class PaymentRecovery {
  readonly #d: RecoveryDeps;
  /** Dead nodes' payments this node is finishing, by node, and what to call once they are all final. */
  readonly #adopted = new Map<string, { open: Set<string>; finished: () => void }>();

  constructor(deps: RecoveryDeps) {
    this.#d = deps;
  }

  /** Resumes every unfinished payment of the store (in a cluster, this node's); relayers read their nonces after the re-sends. */
  async start(): Promise<void> {
    const o = this.#d.options;
    const own = o.node;
    const resumed = await this.#resume(
      (r) => own === undefined || (r.node ?? own) === own,
      async () => {
        await Promise.all(o.networks.all().map((n) => o.relayers(n.caip2).init()));
      },
    );
    o.log.info('payments resumed', { count: resumed.length });
  }

  /**
   * Takes over the unfinished payments of `node`, a cluster node whose lease this node took (it died): resumed as its
   * own restart would resume them, signed transactions re-sent as they were. `finished` is called once every one of
   * them is final (at once when there are none).
   */
  async adopt(node: string, finished: () => void): Promise<number> {
    const resumed = await this.#resume(
      (r) => r.node === node,
      async () => {},
    );
    this.#d.options.log.warn("resumed a dead node's payments", { node, count: resumed.length });
    const open = new Set(resumed.filter((id) => this.#d.host.get(id)));
    if (open.size === 0) finished();
    else this.#adopted.set(node, { open, finished });
    return resumed.length;
  }

  /** A payment ended: the last of an adopted node's gives that node's lease back once its last write is on disk. */
  ended(id: string, record: PaymentRecord): void {
    const adopted = record.node === undefined ? undefined : this.#adopted.get(record.node);
    if (adopted?.open.delete(id) && adopted.open.size === 0) {
      this.#adopted.delete(record.node as string);
      // Its last write is under way (or failed, tried again): the node's lease is given back once it is on disk.
      void this.#d.host.landed(id).then(adopted.finished);
    }
  }

  /** Resumes the unfinished payments `mine` selects; `ready` runs once their transactions went out again, before they start. */
  async #resume(mine: (r: PaymentRecord) => boolean, ready: () => Promise<void>): Promise<string[]> {
    const { options: o, records, host, batcher } = this.#d;
    const unfinished: PaymentRecord[] = [];
    for await (const [, r] of records.entries()) if (!isFinished(r) && mine(r) && !host.get(r.id)) unfinished.push(r);
    const batches: BatchRecord[] = [];
    for (const id of new Set(unfinished.flatMap((r) => (r.batch ? [r.batch.id] : [])))) {
      const batch = await this.#d.batches.get(id);
      // Written in one transaction with its members: a member without its batch record is a broken store.
      if (!batch) o.log.error('a payment names a batch that has no record', { batch: id });
      else batches.push(batch);
    }
    const trails = [...unfinished.filter((r) => !r.batch && r.txs.length), ...batches];
    for (const t of trails) await resend({ pool: o.relayers(t.network) }, t.txs);
    await ready();
    for (const t of trails) o.relayers(t.network).adopt(t.txs.at(-1) as SignedTx);
    const carried = new Map(
      batches.map((batch) => [
        batch.id,
        batcher.resume(
          batch,
          unfinished.filter((r) => r.batch?.id === batch.id),
        ),
      ]),
    );
    for (const r of unfinished) {
      o.log.info('resuming payment', { payment: r.id, state: r.state, tx: currentTxOf(r), batch: r.batch?.id, node: r.node });
      this.#d.spawn(r, r.batch ? carried.get(r.batch.id) : undefined);
    }
    return unfinished.map((r) => r.id);
  }
}
