import { LRUCache } from 'lru-cache';
import { keccak256, type Address, type Chain, type Hex, type PublicClient, type TransactionReceipt, type Transport } from 'viem';
import { err, ok, type Err, type Failure, type Ok } from '../protocol/result.ts';
import { movedExactly } from '../schemes/erc20-transfers.ts';
import type { ChainReads, SettlementCall } from '../schemes/scheme.ts';
import { aggregateCall, aggregateResults } from './settlement-batch.ts';

const ERC1271_MAGIC = '0x1626ba7e';
const erc1271Abi = [
  {
    type: 'function',
    name: 'isValidSignature',
    stateMutability: 'view',
    inputs: [
      { name: 'hash', type: 'bytes32' },
      { name: 'signature', type: 'bytes' },
    ],
    outputs: [{ name: '', type: 'bytes4' }],
  },
] as const;

/** A simulation's gas estimate, or the revert (its text as the message). */
export type Simulation = Ok<bigint> | Err<Failure<'reverted'>>;

/**
 * Who a simulation runs as, and the fees it carries: those of the transaction that will be sent (its relayer, its
 * fee caps), so that a contract reading `tx.gasprice`, `block.basefee` against it, or its caller's balance sees in
 * the simulation what it will see on chain.
 */
export interface SimulationSender {
  from: Address;
  maxFeePerGas?: bigint;
  maxPriorityFeePerGas?: bigint;
}

/** How long "no code at this address" is believed, and how many such answers are kept (oldest dropped first). */
export const ABSENT_CODE_TTL_MS = 30_000;
export const ABSENT_CODE_MAX_ENTRIES = 10_000;
/** Contracts whose calls' gas {@link ChainInspector} keeps (a payment names its asset among those its route accepts). */
const GAS_PER_CALL_MAX_ENTRIES = 1_000;

/**
 * Everything the engine asks of one chain, through the viem client it is given. A payment scheme's revert diagnosis
 * reads through it too (`ChainReads`), sharing its code-existence cache.
 */
export class ChainInspector implements ChainReads {
  readonly #client: PublicClient<Transport, Chain>;
  /** Bounded: a payer address comes from the client, and any existing contract can be named. */
  readonly #deployed = new LRUCache<string, Hex>({ max: ABSENT_CODE_MAX_ENTRIES });
  /** Addresses found without code, with when that answer expires; insertion order is age order. */
  readonly #absent = new Map<string, number>();
  /**
   * By contract: the most gas one settlement call to it has been estimated to take here (a lone call's estimate counts
   * whole, its intrinsic gas included; a batch's is shared out evenly among its calls).
   */
  readonly #gasPerCall = new LRUCache<string, bigint>({ max: GAS_PER_CALL_MAX_ENTRIES });
  readonly #clock: () => number;

  constructor(client: PublicClient<Transport, Chain>, clock: () => number = Date.now) {
    this.#client = client;
    this.#clock = clock;
  }

  get client(): PublicClient<Transport, Chain> {
    return this.#client;
  }

  /**
   * Whether an address has code. Positive answers are cached (code does not vanish in practice; only contracts the
   * service asks about repeatedly end up there); negative ones for {@link ABSENT_CODE_TTL_MS}, at most
   * {@link ABSENT_CODE_MAX_ENTRIES} of them, so that a flood of payments naming an address without code (an asset
   * not deployed, a forged contract payer) costs one `eth_getCode` per address and period, not one per request.
   */
  async hasCode(address: Address): Promise<boolean> {
    const key = address.toLowerCase();
    if (this.#deployed.has(key)) return true;
    const now = this.#clock();
    const expires = this.#absent.get(key);
    if (expires !== undefined) {
      if (expires > now) return false;
      this.#absent.delete(key);
    }
    const code = await this.#client.getCode({ address });
    const has = code !== undefined && code !== '0x';
    if (has) {
      this.#deployed.set(key, keccak256(code));
    } else {
      this.#absent.delete(key);
      this.#absent.set(key, now + ABSENT_CODE_TTL_MS);
      while (this.#absent.size > ABSENT_CODE_MAX_ENTRIES) this.#absent.delete(this.#absent.keys().next().value as string);
    }
    return has;
  }

  /**
   * keccak of an address's runtime code, or undefined where there is none. Read with the code's existence (one
   * `eth_getCode`, cached with it): a contract payer, whose code {@link hasCode} just read, costs no more.
   */
  async codeHash(address: Address): Promise<Hex | undefined> {
    const key = address.toLowerCase();
    const known = this.#deployed.get(key);
    if (known !== undefined) return known;
    return (await this.hasCode(address)) ? this.#deployed.get(key) : undefined;
  }

  /** ERC-1271: a contract wallet vouches for a signature over `digest`. */
  async erc1271Valid(owner: Address, digest: Hex, signature: Hex): Promise<boolean> {
    try {
      const magic = await this.#client.readContract({ address: owner, abi: erc1271Abi, functionName: 'isValidSignature', args: [digest, signature] });
      return magic.toLowerCase() === ERC1271_MAGIC;
    } catch {
      return false;
    }
  }

  /**
   * Runs exactly the call from the sender, with its fees, without sending it (its gas, or a revert as an error text).
   * `carried` are the settlement calls it makes whose share of its gas is kept for {@link gasBound}: only calls whose
   * gas no payer's code decides (payments signed by a key; a contract payer's signature check may take any gas, and
   * anyone may ask `/verify` about one), and none unless given.
   */
  async simulate(call: Pick<SettlementCall, 'to' | 'data'>, sender: SimulationSender, carried: ReadonlyArray<Pick<SettlementCall, 'to'>> = []): Promise<Simulation> {
    try {
      const gas = await this.#client.estimateGas({ account: sender.from, to: call.to, data: call.data, ...feesOf(sender) });
      this.#keepGas(carried, gas);
      return ok(gas);
    } catch (error) {
      return err('reverted', String((error as { shortMessage?: string }).shortMessage ?? (error as Error).message));
    }
  }

  /**
   * The most gas `calls` should take together, from what calls to their contracts have been estimated to take here;
   * undefined while one of those contracts has no estimate yet.
   */
  gasBound(calls: ReadonlyArray<Pick<SettlementCall, 'to'>>): bigint | undefined {
    let sum = 0n;
    for (const call of calls) {
      const gas = this.#gasPerCall.get(call.to.toLowerCase());
      if (gas === undefined) return undefined;
      sum += gas;
    }
    return sum;
  }

  #keepGas(calls: ReadonlyArray<Pick<SettlementCall, 'to'>>, gas: bigint): void {
    if (calls.length === 0) return;
    const share = (gas + BigInt(calls.length) - 1n) / BigInt(calls.length);
    for (const call of calls) {
      const key = call.to.toLowerCase();
      if (share > (this.#gasPerCall.get(key) ?? 0n)) this.#gasPerCall.set(key, share);
    }
  }

  /**
   * Runs exactly the call from the sender with `gas` as its limit, without sending it: whether it succeeds within it
   * (one execution, where an estimate searches for the least gas that works and runs it several times).
   */
  async succeedsWithin(call: Pick<SettlementCall, 'to' | 'data'>, sender: SimulationSender, gas: bigint): Promise<boolean> {
    try {
      await this.#client.call({ account: sender.from, to: call.to, data: call.data, gas, ...feesOf(sender) });
      return true;
    } catch {
      return false;
    }
  }

  /** Runs every call in one `aggregate3` through `multicall`, each allowed to fail: which would succeed, in order. */
  async simulateBatch(multicall: Address, calls: readonly SettlementCall[], sender: SimulationSender): Promise<boolean[]> {
    const { data: returned } = await this.#client.call({ account: sender.from, ...aggregateCall(multicall, calls, true), ...feesOf(sender) });
    if (!returned) throw new Error(`no aggregate3 answered at ${multicall}`);
    return aggregateResults(returned);
  }

  /** A settlement counts only if its receipt logs the expected Transfer from the asset itself. */
  static transferMatches(receipt: TransactionReceipt, expect: SettlementCall['expect']): boolean {
    return movedExactly(receipt.logs, expect);
  }
}

/** The fee fields of a simulation, when the sender's are known (else the node's defaults: a gas price of 0). */
function feesOf(sender: SimulationSender): { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } | Record<string, never> {
  return sender.maxFeePerGas !== undefined ? { maxFeePerGas: sender.maxFeePerGas, maxPriorityFeePerGas: sender.maxPriorityFeePerGas ?? 0n } : {};
}
