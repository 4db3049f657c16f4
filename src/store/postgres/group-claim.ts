import type { LeaseToken } from '../fence.ts';
import type { RecordOrders, Refused } from '../record-order.ts';
import type { RecordWrite } from '../write-set.ts';
import { fenceCte, fenceValues, passedFence, refusedWrites, upsertRecords, writeColumns } from './record-writes.ts';

/** What one statement of claims (or takeovers) answers: the fence held, the keys won, the records written. */
export interface ClaimRow {
  live: boolean;
  won: string[];
  written: string[];
}

/** Runs one claim statement; the store's `Sql.write`, timed and counted toward its health. */
export type RunClaims = (text: string, values: unknown[]) => Promise<ClaimRow | undefined>;

/** A claim of `key` for `holder`, or (with `from`) a takeover of it from `from`, with the records written only if it wins. */
export interface ClaimAsk {
  space: string;
  key: string;
  holder: string;
  from?: string;
  writes: RecordWrite<string>[];
}

/** What a claim or takeover came to: won (inserted, or moved), and the writes that went with it refused as backward. */
export interface ClaimOutcome {
  won: boolean;
  refused: Array<{ collection: string; key: string; refused: Refused }>;
}

interface Caller {
  ask: ClaimAsk;
  resolve(outcome: ClaimOutcome): void;
  reject(err: unknown): void;
}

/** Callers whose asks go in one statement: one space, one kind, one lease, no claim key and no record twice. */
interface Group {
  kind: 'claim' | 'takeover';
  space: string;
  lease: LeaseToken | undefined;
  ids: Set<string>;
  callers: Caller[];
}

/** The most claims one statement carries; more wait for the next. */
const MAX_CLAIMS = 512;

/** The claims asked (`$2` keys, `$3` holders) in space `$1`, with their records from `$4` (claimed by key), fenced from `$10`. */
const CLAIMS = (fenced: boolean) => `WITH ${fenceCte(fenced ? 10 : undefined)},
  c AS (INSERT INTO claims (space, key, holder) SELECT $1, i.key, i.holder FROM unnest($2::text[], $3::text[]) AS i(key, holder)
        WHERE EXISTS (SELECT 1 FROM fence) ON CONFLICT DO NOTHING RETURNING key),
  w AS (${upsertRecords(4, 'u.claim IN (SELECT key FROM c)', true)})
  SELECT EXISTS (SELECT 1 FROM fence) AS live, ARRAY(SELECT key FROM c) AS won, ARRAY(SELECT collection || '/' || key FROM w) AS written`;

/** The takeovers asked (`$2` keys, `$3` from, `$4` to) in space `$1`, with their records from `$5`, fenced from `$11`. */
const TAKEOVERS = (fenced: boolean) => `WITH ${fenceCte(fenced ? 11 : undefined)},
  c AS (UPDATE claims SET holder = i.holder FROM unnest($2::text[], $3::text[], $4::text[]) AS i(key, previous, holder)
        WHERE claims.space = $1 AND claims.key = i.key AND claims.holder = i.previous AND EXISTS (SELECT 1 FROM fence) RETURNING claims.key),
  w AS (${upsertRecords(5, 'u.claim IN (SELECT key FROM c)', true)})
  SELECT EXISTS (SELECT 1 FROM fence) AS live, ARRAY(SELECT key FROM c) AS won, ARRAY(SELECT collection || '/' || key FROM w) AS written`;

const TEXTS = { claim: { fenced: CLAIMS(true), alone: CLAIMS(false) }, takeover: { fenced: TAKEOVERS(true), alone: TAKEOVERS(false) } };

/**
 * Group commit of claims and takeovers, as `group-commit.ts` does for record writes: the claims of one space asked
 * in one turn of the event loop go in one multi-row `INSERT ... ON CONFLICT DO NOTHING` (takeovers: one `UPDATE ...
 * FROM unnest`), with every claim's records written in the same statement only if that claim won, so one statement
 * and one commit for the claims of many payments arriving together (each of them used to be a statement of its own,
 * waiting for a connection behind all the others). Nothing is weaker than claimed alone: of concurrent claims on a
 * key, from any number of nodes, exactly one inserts the row; each row and each record keeps its own outcome; the
 * statement carries the lease in its fence. A key (or a record) asked twice in one turn waits for the next statement,
 * so asks of one key keep their order. A statement that fails for what one caller carried (a data error) is run
 * again caller by caller, so one bad record fails only its own claim.
 */
export class GroupClaims {
  readonly #run: RunClaims;
  readonly #orders: RecordOrders | undefined;
  readonly #isDataError: (err: unknown) => boolean;
  /** This turn's groups, by kind, space and lease. */
  #groups = new Map<string, Group>();
  /** Asks that met their key (or record) already in this turn's group: they go once this turn's statements are done. */
  #later: Array<{ caller: Caller; lease: LeaseToken | undefined }> = [];
  #scheduled = false;

  constructor(run: RunClaims, orders: RecordOrders | undefined, isDataError: (err: unknown) => boolean) {
    this.#run = run;
    this.#orders = orders;
    this.#isDataError = isDataError;
  }

  /** Claims (or, with `from`, takes over) `ask.key` with the next statement of its space, fenced by `lease`. */
  ask(ask: ClaimAsk, lease: LeaseToken | undefined): Promise<ClaimOutcome> {
    return new Promise((resolve, reject) => this.#add({ ask, resolve, reject }, lease));
  }

  #add(caller: Caller, lease: LeaseToken | undefined): void {
    const { ask } = caller;
    const kind = ask.from === undefined ? 'claim' : 'takeover';
    const id = `${kind}|${ask.space}|${lease?.name ?? ''}|${lease?.epoch ?? ''}`;
    let group = this.#groups.get(id);
    const ids = [`claim:${ask.key}`, ...ask.writes.map((w) => `${w.target}/${w.key}`)];
    if (group && (group.callers.length >= MAX_CLAIMS || ids.some((i) => group?.ids.has(i)))) {
      this.#later.push({ caller, lease });
      return;
    }
    if (!group) {
      group = { kind, space: ask.space, lease, ids: new Set(), callers: [] };
      this.#groups.set(id, group);
    }
    for (const i of ids) group.ids.add(i);
    group.callers.push(caller);
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => void this.#flush());
    }
  }

  /** Runs this turn's groups (each its own statement, at once: no key is in two of them), then the asks left for later. */
  async #flush(): Promise<void> {
    const groups = [...this.#groups.values()];
    const later = this.#later;
    this.#groups = new Map();
    this.#later = [];
    this.#scheduled = false;
    await Promise.all(groups.map((g) => this.#commit(g, g.callers)));
    for (const { caller, lease } of later) this.#add(caller, lease);
  }

  async #commit(group: Group, asked: Caller[]): Promise<void> {
    // In key order: two nodes' statements lock the claims they share in the same order, so they cannot deadlock (in
    // arrival order, a payment sent to both nodes among others could have each wait for the other until PostgreSQL's
    // deadlock check aborts one, failing every claim it carried).
    const callers = asked.length > 1 ? [...asked].sort((a, b) => (a.ask.key < b.ask.key ? -1 : a.ask.key > b.ask.key ? 1 : 0)) : asked;
    const asks = callers.map((c) => c.ask);
    const writes = asks.flatMap((a) => a.writes);
    const columns = writeColumns(writes, this.#orders);
    const claimOf = asks.flatMap((a) => a.writes.map(() => a.key));
    const head = group.kind === 'claim' ? [asks.map((a) => a.holder)] : [asks.map((a) => a.from as string), asks.map((a) => a.holder)];
    const texts = TEXTS[group.kind];
    let row: ClaimRow | undefined;
    try {
      row = await this.#run(group.lease ? texts.fenced : texts.alone, [group.space, asks.map((a) => a.key), ...head, ...columns, claimOf, ...fenceValues(group.lease)]);
      passedFence(group.lease, row);
    } catch (err) {
      if (callers.length > 1 && this.#isDataError(err)) {
        await Promise.all(callers.map((c) => this.#commit(group, [c])));
        return;
      }
      for (const caller of callers) caller.reject(err);
      return;
    }
    const won = new Set(row?.won ?? []);
    const written = row?.written ?? [];
    for (const caller of callers) {
      const wins = won.has(caller.ask.key);
      caller.resolve({ won: wins, refused: wins ? refusedWrites(caller.ask.writes, written, this.#orders) : [] });
    }
  }
}
