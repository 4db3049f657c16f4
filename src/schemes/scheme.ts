import type { Address, Chain, Hex, PublicClient, TransactionReceipt, Transport } from 'viem';
import type { StablecoinInfo } from '../chain/network-types.ts';
import type { Network } from '../chain/networks.ts';
import type { ExactEvmPayload, PaymentRequirements, SettleResponse, VerifyRequest } from '../protocol/x402/types.ts';
import type { InvalidReason } from '../verify/reasons.ts';
import type { Err, Ok } from '../protocol/result.ts';
import type { PaymentRefusal } from '../verify/checks.ts';
import type { VerifyJob } from '../verify/signature/jobs.ts';

/**
 * One way an x402 `exact` payment moves its tokens on chain (EIP-3009's `transferWithAuthorization`, or Permit2
 * through the exact-permit proxy). Everything the engine asks of a payment that depends on how it moves lives behind
 * this interface; the engine picks the scheme once (schemes/registry.ts) and never branches on it.
 *
 * Pure parts take everything as parameters; the chain reads take the reader they use.
 */
export interface PaymentScheme {
  /** Stable, lower-case: the prefix of nonce claim keys and the batch partition. */
  readonly name: SchemeName;
  /** The reason codes this scheme reports, where every scheme has one. */
  readonly reasons: SchemeReasons;
  /**
   * Whether the asset's code is checked before whose signature it is (Permit2), or after (EIP-3009), as the
   * reference facilitator orders its checks.
   */
  readonly assetCheckedFirst: boolean;
  /** The requirements name this scheme's transfer method (`extra.assetTransferMethod`). */
  asks(requirements: PaymentRequirements): boolean;
  /**
   * The `extra` of requirements that ask for this scheme on a network (what a payer needs to sign); undefined where
   * the network lacks what the scheme settles through.
   */
  requirementsExtra(network: Pick<Network, 'stablecoin' | 'exactPermit2Proxy'>): Record<string, unknown> | undefined;
  /** The payload has this scheme's shape. */
  carries(payload: ExactEvmPayload): boolean;
  /** Who pays: the address whose tokens move. */
  payer(payload: ExactEvmPayload): Address;
  /** Every check of the payload against the requirements that needs no chain, no key and no clock of its own. */
  check(input: CheckInput): Checked;
  /** The call that settles the payload; undefined where the chain lacks what the scheme settles through. */
  settlementCall(payload: ExactEvmPayload, where: SettlementSite): SettlementCall | undefined;
  /** A settlement call of this scheme read back from its target and calldata (a batch holds only these); else undefined. */
  decodeCall(to: Address, data: Hex): SettlementCall | undefined;
  /** Exactly the ERC-20 Transfer the settlement of `request` must log. */
  expectedTransfer(request: VerifyRequest): ExpectedTransfer;
  /** The key the chain itself makes unique for this payment: one settlement per key, ever. */
  nonceKey(request: VerifyRequest): string;
  /** Why the settlement call reverts (or reverted), in the reference's terms, read from the chain. */
  diagnoseRevert(chain: ChainReads, call: SettlementCall, payload: ExactEvmPayload): Promise<InvalidReason>;
  /** Whether the payment's authorization was consumed on chain, by whoever sent it, and by which transaction. */
  consumption(reads: ConsumptionReads, payload: ExactEvmPayload, call: SettlementCall): Promise<Consumption>;
  /**
   * Checks a scheme makes on chain beyond the signature and the asset's code, after them (a channel deposit: the
   * voucher's signature, the payer's balance, the channel's state); its value is the verify answer's `extra`.
   */
  chainCheck?(reads: ChainReads, request: VerifyRequest, payer: Address): Promise<Ok<Record<string, unknown> | undefined> | Err<PaymentRefusal>>;
  /** What a settled answer carries beyond the transaction (a deposit: `amount` and the channel's state), read once it mined. */
  settledDetails?(reads: ChainReads, request: VerifyRequest): Promise<Pick<SettleResponse, 'amount' | 'extra'>>;
}

/** `deposit-*`: the deposit of an x402 `batch-settlement` channel, by each of its two collectors. */
export type SchemeName = 'eip3009' | 'permit2' | 'deposit-eip3009' | 'deposit-permit2';

export interface SchemeReasons {
  /** The signature is neither the payer's key's nor vouched for by the payer contract. */
  signature: InvalidReason;
  /** No contract at the asset. */
  assetNotDeployed: InvalidReason;
  /** The amount is not worth settling (below the minimum, or zero). */
  amountMismatch: InvalidReason;
  /** The authorization is used (by anyone). */
  nonceUsed: InvalidReason;
  /** The settlement transaction reverted. */
  transactionFailed: InvalidReason;
  /** The call reverts and nothing the chain shows explains why. */
  simulationFailed: InvalidReason;
  /** The settlement mined without exactly the Transfer it must log (or a batch names a call that is not the payment's). */
  transferEventMismatch: InvalidReason;
  /** The payer's balance does not cover the amount. */
  insufficientBalance: InvalidReason;
}

/** Exactly the ERC-20 Transfer a successful settlement logs. */
export interface ExpectedTransfer {
  token: Address;
  from: Address;
  to: Address;
  value: bigint;
}

/** Exactly the call a settlement makes; simulation runs this same call, so what passed is what is sent. */
export interface SettlementCall {
  to: Address;
  data: Hex;
  /** The ERC-20 Transfer a successful settlement must log. */
  expect: ExpectedTransfer;
  /**
   * A log that only this call can make, which tells it apart in a batch receipt from a call moving the same amount
   * between the same two addresses (EIP-3009: the token's `AuthorizationUsed(authorizer, nonce)`). Absent where the
   * contracts log nothing of the kind (Permit2 logs no nonce).
   */
  ownLog?: { emitter: Address; topics: readonly Hex[] };
}

/** What the pure checks are given. `now` is unix seconds. */
export interface CheckInput {
  requirements: PaymentRequirements;
  /** The requirements the payer says it accepted (echoed in the payload). */
  accepted: PaymentRequirements;
  payload: ExactEvmPayload;
  network: Network;
  token: StablecoinInfo;
  now: bigint;
}

export type Checked =
  | ({
      ok: true;
      payer: Address;
      /** Who is paid how much, as signed (what the payment policy judges). */
      payee: Address;
      amount: bigint;
      call: SettlementCall;
    } & SignedMessage)
  | Err<PaymentRefusal>;

/**
 * What the payer signed: a job of the signature pool (whose binary records know the `exact` messages), or the EIP-712
 * digest of another message and its signature (recovered on the calling thread: deposits are rare).
 */
export type SignedMessage = { job: VerifyJob; digest?: undefined } | { job?: undefined; digest: Hex; signature: Hex };

/** Where a settlement call goes: the chain's contracts and its configured stablecoin. */
export interface SettlementSite {
  network: Pick<Network, 'exactPermit2Proxy'>;
  token: Pick<StablecoinInfo, 'address'>;
}

export type ChainReader = PublicClient<Transport, Chain>;

/** The chain reads a revert diagnosis makes: plain calls, and code existence (cached by the caller). */
export interface ChainReads {
  readonly client: ChainReader;
  hasCode(address: Address): Promise<boolean>;
  /** ERC-1271: the contract at `owner` vouches for `signature` over `digest`. */
  erc1271Valid?(owner: Address, digest: Hex, signature: Hex): Promise<boolean>;
}

/** What a consumption read is given: the chain, its contracts, and how far back to search its logs. */
export interface ConsumptionReads {
  client: ChainReader;
  /** The chain's Permit2 and (where batches are sent) Multicall3. */
  chain: { permit2: Address; multicall?: Address };
  search: ConsumptionSearch;
  /**
   * The calls of a batch transaction (its calldata and receipt) that settled, each owning its Transfer; empty when
   * the transaction is not a batch that can be read.
   */
  settledBatchCalls(input: Hex, receipt: TransactionReceipt): Array<Pick<SettlementCall, 'to' | 'data'>>;
}

export interface ConsumptionSearch {
  lookbackBlocks: bigint;
  chunkBlocks?: bigint;
}

export type Consumption =
  | { consumed: false }
  /** Consumed by `transaction` (ours or anyone's), which moved exactly the amount from the payer to the payee. */
  | { consumed: true; transaction: Hex; blockNumber: bigint }
  /** Consumed, and no transaction found that moved the amount to the payee for it. */
  | { consumed: true; transaction?: undefined; why: string };
