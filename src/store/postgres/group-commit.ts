import type { LeaseToken } from '../fence.ts';
import type { RecordOrders, Refused } from '../record-order.ts';
import type { RecordWrite } from '../write-set.ts';
import { passedFence, refusedWrites, storedRanks, upsertStatement } from './record-writes.ts';

/** What one statement of record writes answers: the fence held, the rows written, the stored ranks of those refused. */
export interface UpsertRow {
  live: boolean;
  written: string[];
  stored: string[] | null;
}

/** Runs one upsert statement (`upsertStatement`); the store's `Sql.write`, timed and counted toward its health. */
export type RunUpsert = (text: string, values: unknown[]) => Promise<UpsertRow | undefined>;

/** One caller's writes (a `put`, or an `atomically` transaction): applied together, and told what was refused. */
interface Caller {
  writes: RecordWrite<string>[];
  resolve(refused: Array<{ collection: string; key: string; refused: Refused }>): void;
  reject(err: unknown): void;
}

/** Callers whose writes go in one statement: one lease, no key twice. */
interface Group {
  lease: LeaseToken | undefined;
  keys: Set<string>;
  rows: number;
  callers: Caller[];
}

/** The most rows one statement carries; more wait for the next. */
const MAX_ROWS = 512;

/**
 * Group commit of record writes, as LMDB's write queue batches its transactions: every record write (a collection's
 * `put`, a `Store.atomically`) made in one turn of the event loop goes into one multi-row upsert, so one statement
 * and one commit (one WAL flush) for the writes of many payments arriving together, each caller resolved once that
 * commit is durable. Nothing is weaker than written alone: the statement carries the writers' lease in its fence (a
 * group has one lease), every row keeps its own rank comparison (a refused row is told to its caller alone), and a
 * caller's writes are all in one statement, so all or nothing. Writes of one key go in separate statements, in the
 * order they were made. A statement that fails for what one caller carried (a data error) is run again caller by
 * caller, so one bad record fails only its own write.
 */
export class GroupCommit {
  readonly #run: RunUpsert;
  readonly #orders: RecordOrders | undefined;
  readonly #isDataError: (err: unknown) => boolean;
  #groups: Group[] = [];
  #scheduled = false;

  constructor(run: RunUpsert, orders: RecordOrders | undefined, isDataError: (err: unknown) => boolean) {
    this.#run = run;
    this.#orders = orders;
    this.#isDataError = isDataError;
  }

  /** Writes `writes` with the next group, fenced by `lease`; answers the writes refused as backward. */
  write(writes: RecordWrite<string>[], lease: LeaseToken | undefined): Promise<Array<{ collection: string; key: string; refused: Refused }>> {
    return new Promise((resolve, reject) => {
      const ids = writes.map((w) => `${w.target}/${w.key}`);
      let group = this.#groups.at(-1);
      if (!group || !sameLease(group.lease, lease) || group.rows + writes.length > MAX_ROWS || ids.some((id) => group?.keys.has(id))) {
        group = { lease, keys: new Set(), rows: 0, callers: [] };
        this.#groups.push(group);
      }
      for (const id of ids) group.keys.add(id);
      group.rows += writes.length;
      group.callers.push({ writes, resolve, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => void this.#flush());
      }
    });
  }

  /** Runs the groups gathered this turn, one statement each, in order (a later group may write a key an earlier one did). */
  async #flush(): Promise<void> {
    const groups = this.#groups;
    this.#groups = [];
    this.#scheduled = false;
    for (const group of groups) await this.#commit(group.callers, group.lease);
  }

  async #commit(callers: Caller[], lease: LeaseToken | undefined): Promise<void> {
    // Rows in key order (a group holds a key once; outcomes are told by key): two nodes' statements writing records
    // they share lock them in the same order, so they cannot deadlock.
    const writes = callers.flatMap((c) => c.writes).sort(byRecord);
    let row: UpsertRow | undefined;
    try {
      const { text, values } = upsertStatement(writes, lease, this.#orders);
      row = await this.#run(text, values);
      passedFence(lease, row);
    } catch (err) {
      if (callers.length > 1 && this.#isDataError(err)) {
        for (const caller of callers) await this.#commit([caller], lease);
        return;
      }
      for (const caller of callers) caller.reject(err);
      return;
    }
    const written = row?.written ?? [];
    if (written.length === writes.length) {
      for (const caller of callers) caller.resolve([]);
      return;
    }
    const stored = storedRanks(row?.stored);
    for (const caller of callers) caller.resolve(refusedWrites(caller.writes, written, this.#orders, stored));
  }
}

function byRecord(a: RecordWrite<string>, b: RecordWrite<string>): number {
  return a.target < b.target ? -1 : a.target > b.target ? 1 : a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

function sameLease(a: LeaseToken | undefined, b: LeaseToken | undefined): boolean {
  return a === b || (a !== undefined && b !== undefined && a.name === b.name && a.epoch === b.epoch);
}
