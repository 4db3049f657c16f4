import { encodeFunctionData, erc20Abi, getAddress, parseEventLogs, type Address, type Chain, type Hex, type PublicClient, type TransactionReceipt, type Transport } from 'viem';
import { PERMIT2_ADDRESS } from '../chain/canonical.ts';
import { err, ok, type Err, type Failure, type Ok } from '../protocol/result.ts';
import { nonceBitmapAbi } from '../schemes/permit2/abi.ts';
import type { StockInfo, UniswapInfo } from '../chain/network-types.ts';
import type { Network } from '../chain/networks.ts';
import { sortTokens, stockPriceFromSqrtPriceX96, uniswapPoolAddress } from '../chain/uniswap-math.ts';
import { quoterV2Abi, swapRouterAbi, uniswapV3FactoryAbi, uniswapV3PoolAbi } from './contract-abis.ts';

/** The pinned pool is the pair's, or why not (the message). */
export type PoolCheck = Ok<undefined> | Err<Failure<'pool_mismatch'>>;

/** A Permit2 witness payment of stablecoin B, as signed: who pays whom how much, under which nonce. */
export interface Permit2Payment {
  from: Address;
  to: Address;
  amount: bigint;
  nonce: bigint;
}

/** Whether a payment reached its payee on chain, and in which transaction. */
export type PaymentEvidence = { moved: false; nonceUsed: boolean } | { moved: true; transaction: Hex };

/** How far back a payment is looked for when its order names no starting block (an order written before it did). */
const EVIDENCE_FALLBACK_BLOCKS = 10_000n;

/**
 * The stock chain as the stock desk reads it: live prices from the pinned pools, QuoterV2 estimates, the pool
 * re-verification done before funds move, and the calls a swap and a refund make. Reads only; the desk sends.
 */
export class StockMarket {
  readonly network: Network;
  readonly uniswap: UniswapInfo;
  readonly #client: PublicClient<Transport, Chain>;

  constructor(network: Network, client: PublicClient<Transport, Chain>) {
    if (!network.uniswap || !network.stocks?.length) throw new Error(`${network.caip2} lists no stocks`);
    this.network = network;
    this.uniswap = network.uniswap;
    this.#client = client;
  }

  get client(): PublicClient<Transport, Chain> {
    return this.#client;
  }

  get stocks(): StockInfo[] {
    return this.network.stocks ?? [];
  }

  get stable(): Address {
    return this.network.stablecoin.address;
  }

  /** The chain's latest block number, read now (not cached): reads given it agree with each other. */
  async blockNumber(): Promise<bigint> {
    return this.#client.getBlockNumber({ cacheTime: 0 });
  }

  /** Stablecoin B atomic units per whole share at the pool's current price (or at `blockNumber`). */
  async livePrice(stock: StockInfo, blockNumber?: bigint): Promise<bigint> {
    const slot0 = await this.#client.readContract({ address: stock.pool, abi: uniswapV3PoolAbi, functionName: 'slot0', ...at(blockNumber) });
    const [token0] = sortTokens(this.stable, stock.address);
    return stockPriceFromSqrtPriceX96(slot0[0], stock.decimals, token0.toLowerCase() === this.stable.toLowerCase());
  }

  /** QuoterV2's on-chain estimate of the shares `amountIn` buys now, or at `blockNumber` (an eth_call; nothing is sent). */
  async quote(stock: StockInfo, amountIn: bigint, blockNumber?: bigint): Promise<bigint> {
    const { result } = await this.#client.simulateContract({
      address: this.uniswap.quoter,
      abi: quoterV2Abi,
      functionName: 'quoteExactInputSingle',
      args: [{ tokenIn: this.stable, tokenOut: stock.address, amountIn, fee: stock.fee, sqrtPriceLimitX96: 0n }],
      ...at(blockNumber),
    });
    return result[0];
  }

  /**
   * The pinned pool is the one the factory's CREATE2 derives for (stablecoin B, stock, fee), the factory names it
   * for that pair, and the contract there reports that pair and fee: otherwise no swap goes through it.
   */
  async verifyPool(stock: StockInfo): Promise<PoolCheck> {
    const derived = uniswapPoolAddress(this.uniswap.factory, this.stable, stock.address, stock.fee, this.uniswap.poolInitCodeHash);
    if (derived.toLowerCase() !== stock.pool.toLowerCase()) return err('pool_mismatch', `the pinned ${stock.symbol} pool ${stock.pool} is not the factory-derived ${derived}`);
    const [registered, token0, token1, fee] = await Promise.all([
      this.#client.readContract({ address: this.uniswap.factory, abi: uniswapV3FactoryAbi, functionName: 'getPool', args: [this.stable, stock.address, stock.fee] }),
      this.#client.readContract({ address: stock.pool, abi: uniswapV3PoolAbi, functionName: 'token0' }),
      this.#client.readContract({ address: stock.pool, abi: uniswapV3PoolAbi, functionName: 'token1' }),
      this.#client.readContract({ address: stock.pool, abi: uniswapV3PoolAbi, functionName: 'fee' }),
    ]);
    if (getAddress(registered) !== getAddress(stock.pool)) return err('pool_mismatch', `the factory names ${registered} as the ${stock.symbol} pool, not ${stock.pool}`);
    const [want0, want1] = sortTokens(this.stable, stock.address);
    if (getAddress(token0) !== getAddress(want0) || getAddress(token1) !== getAddress(want1) || Number(fee) !== stock.fee) {
      return err('pool_mismatch', `the ${stock.symbol} pool reports ${token0}/${token1} at fee ${fee}, not the pinned pair`);
    }
    return ok(undefined);
  }

  /** The router call that swaps exactly `amountIn` for at least `minOut` shares, delivered to `recipient`. */
  swapCall(stock: StockInfo, amountIn: bigint, minOut: bigint, recipient: Address, deadline: bigint): { to: Address; data: Hex } {
    return {
      to: this.uniswap.router,
      data: encodeFunctionData({
        abi: swapRouterAbi,
        functionName: 'exactInputSingle',
        args: [{ tokenIn: this.stable, tokenOut: stock.address, fee: stock.fee, recipient, deadline, amountIn, amountOutMinimum: minOut, sqrtPriceLimitX96: 0n }],
      }),
    };
  }

  /** Stablecoin B back to the payer. */
  refundCall(payer: Address, amount: bigint): { to: Address; data: Hex } {
    return { to: this.stable, data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [payer, amount] }) };
  }

  /** Shares a swap receipt delivered to `recipient`: the stock token's own Transfer logs, summed. */
  static delivered(receipt: TransactionReceipt, stock: Address, recipient: Address): bigint {
    const logs = parseEventLogs({ abi: erc20Abi, eventName: 'Transfer', logs: receipt.logs, strict: true });
    let total = 0n;
    for (const log of logs) {
      if (log.address.toLowerCase() === stock.toLowerCase() && log.args.to.toLowerCase() === recipient.toLowerCase()) total += log.args.value;
    }
    return total;
  }

  /**
   * Did this payment move, whatever a settlement reported? Its Permit2 nonce must be used, and a Transfer of exactly
   * the amount of stablecoin B from the payer to the payee must be logged since `sinceBlock` by a transaction whose
   * input carries that nonce (whoever sent it: our relayer, or someone who copied the call). Reads only; an RPC
   * failure throws (an unknown answer is not a no).
   */
  async permit2Evidence(p: Permit2Payment, sinceBlock: bigint | undefined): Promise<PaymentEvidence> {
    const permit2 = this.network.permit2 ?? PERMIT2_ADDRESS;
    const word = (await this.#client.readContract({ address: permit2, abi: nonceBitmapAbi, functionName: 'nonceBitmap', args: [p.from, p.nonce >> 8n] })) as bigint;
    if (((word >> (p.nonce & 0xffn)) & 1n) === 0n) return { moved: false, nonceUsed: false };
    const latest = await this.blockNumber();
    const fromBlock = sinceBlock ?? (latest > EVIDENCE_FALLBACK_BLOCKS ? latest - EVIDENCE_FALLBACK_BLOCKS : 0n);
    const logs = await this.#client.getLogs({
      address: this.stable,
      event: erc20Abi.find((e) => e.type === 'event' && e.name === 'Transfer') as Extract<(typeof erc20Abi)[number], { type: 'event'; name: 'Transfer' }>,
      args: { from: p.from, to: p.to },
      fromBlock,
      toBlock: latest,
      strict: true,
    });
    const nonceWord = p.nonce.toString(16).padStart(64, '0');
    for (const log of logs) {
      if (log.args.value !== p.amount || !log.transactionHash) continue;
      const tx = await this.#client.getTransaction({ hash: log.transactionHash });
      if (tx.input.toLowerCase().includes(nonceWord)) return { moved: true, transaction: log.transactionHash };
    }
    return { moved: false, nonceUsed: true };
  }

  async allowance(token: Address, owner: Address, spender: Address): Promise<bigint> {
    return this.#client.readContract({ address: token, abi: erc20Abi, functionName: 'allowance', args: [owner, spender] });
  }

  async balanceOf(token: Address, owner: Address, blockNumber?: bigint): Promise<bigint> {
    return this.#client.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [owner], ...at(blockNumber) });
  }

  async totalSupply(token: Address, blockNumber?: bigint): Promise<bigint> {
    return this.#client.readContract({ address: token, abi: erc20Abi, functionName: 'totalSupply', ...at(blockNumber) });
  }
}

/** A read at `blockNumber`, or at the latest block when none is given. */
function at(blockNumber: bigint | undefined): { blockNumber?: bigint } {
  return blockNumber === undefined ? {} : { blockNumber };
}
