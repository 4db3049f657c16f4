import { bytesToHex, recoverAddress, type Address, type Hex } from 'viem';
import type { StablecoinInfo } from '../chain/network-types.ts';
import type { Network, NetworkRegistry } from '../chain/networks.ts';
import type { VerifyRequest } from '../protocol/x402/types.ts';
import { schemeForRequirements, schemeOfPayload } from '../schemes/registry.ts';
import type { PaymentScheme, SchemeName, SettlementCall, SignedMessage } from '../schemes/scheme.ts';
import { checkPaymentTerms, type PaymentPolicy } from '../policy/payment-policy.ts';
import { ok, type Err, type Ok } from '../protocol/result.ts';
import { refusedPayer, type PaymentRefusal } from '../verify/checks.ts';
import { GatewayReason, RequestReason, type InvalidReason } from '../verify/reasons.ts';
import { jobDigest, type VerifyJob } from '../verify/signature/jobs.ts';
import type { ChainInspector, SimulationSender } from './chain-inspector.ts';

export interface SignatureRecoverer {
  verify(job: VerifyJob): Promise<Address | undefined>;
}

/** What verification needs from the world, passed in so tests and the bench can drive it. */
export interface VerifyDeps {
  networks: NetworkRegistry;
  inspector(caip2: string): ChainInspector;
  signatures: SignatureRecoverer;
  /** Unix seconds. */
  now(): bigint;
  /** Who simulates the settlement: the relayer that would send it, with the fees it would sign (see `RelayerPool.nextSender`). */
  simulateFrom(caip2: string): SimulationSender | Promise<SimulationSender>;
  /** Which payments are worth settling at all (pure checks on the signed terms). */
  policy: PaymentPolicy;
}

/**
 * A payment verification passed: who pays, on which network, with which call. `signer`: the payer's own key signed,
 * or (ERC-1271) a payer contract vouched for the signature, in which case `codeHash` is the keccak of the payer's
 * runtime code. `gas`: what simulation measured, once it ran.
 */
export interface Verified {
  payer: Address;
  network: string;
  kind: SchemeName;
  call: SettlementCall;
  signer: Signer;
  codeHash?: Hex;
  gas?: bigint;
  /** What the scheme's chain checks found, answered as the verify answer's `extra` (a deposit's channel state). */
  extra?: Record<string, unknown>;
}

export type Verdict = Ok<Verified> | Err<PaymentRefusal>;

/** A payment refused with `reason`, naming its payer once known. */
const refused = (reason: InvalidReason, message: string, payer?: Address): Err<PaymentRefusal> => refusedPayer({ code: reason, message }, payer);

type Signer = 'key' | 'contract';

/**
 * What the checks that need no chain found: the payer, the settlement call, and whether the payer's own key signed
 * (recovered locally; when it did not, only the chain can tell whether a payer contract vouches for the signature).
 */
export interface Prechecked {
  payer: Address;
  network: Network;
  scheme: PaymentScheme;
  token: StablecoinInfo;
  call: SettlementCall;
  signed: SignedMessage;
  signedByKey: boolean;
}

export type Precheck = Ok<Prechecked> | Err<PaymentRefusal>;

/**
 * Every check of a payment that needs no chain, the payment policy included: unconfigured networks and assets,
 * scheme, domain, recipient, time window, amount, payee, and the signature recovered locally. A payment that fails
 * here never costs an RPC call. Where two checks fail, the reference's order is kept except that a signature that
 * no key made is reported only after the terms (whether a contract wallet vouches for it is a chain question).
 */
export async function precheckPayment(deps: Pick<VerifyDeps, 'networks' | 'signatures' | 'now' | 'policy'>, request: VerifyRequest, policy: PaymentPolicy = deps.policy): Promise<Precheck> {
  const req = request.paymentRequirements;
  const accepted = request.paymentPayload.accepted;
  const network = deps.networks.find(req.network);
  if (!network) return refused(RequestReason.invalidNetwork, `network ${req.network} is not served here`);
  const token = deps.networks.stablecoinOn(req.network, req.asset);
  if (!token) return refused(GatewayReason.unsupportedAsset, `asset ${req.asset} is not a configured stablecoin on ${req.network}`);
  const scheme = schemeForRequirements(req);
  const checked = scheme.check({ requirements: req, accepted, payload: request.paymentPayload.payload, network, token, now: deps.now() });
  if (!checked.ok) return checked;
  const { payer, call } = checked;
  const signed: SignedMessage = checked.job ? { job: checked.job } : { digest: checked.digest, signature: checked.signature };
  const policed = await checkPaymentTerms(policy, { kind: scheme.name, payer, payee: checked.payee, amount: checked.amount, network: network.caip2 });
  if (!policed.ok) return refused(policed.error.code, policed.error.message, payer);
  const signedByKey = sameAddress(await signerOf(deps.signatures, signed), payer);
  return ok({ payer, network, scheme, token, call, signed, signedByKey });
}

/** Who signed: the pool recovers a job; a digest is recovered here. Undefined for a signature no key made. */
async function signerOf(signatures: SignatureRecoverer, signed: SignedMessage): Promise<Address | undefined> {
  if (signed.job) return signatures.verify(signed.job);
  return recoverAddress({ hash: signed.digest, signature: signed.signature }).catch(() => undefined);
}

const sameAddress = (a: string | undefined, b: string): boolean => a !== undefined && a.toLowerCase() === b.toLowerCase();

/** Signature by the payer's key (already recovered), or (for a payer with code) vouched for by the payer contract under ERC-1271. */
async function signedBy(inspector: ChainInspector, pre: Prechecked): Promise<Signer | undefined> {
  if (pre.signedByKey) return 'key';
  if (!(await inspector.hasCode(pre.payer))) return undefined;
  const { signed } = pre;
  const digest = signed.job ? jobDigest(signed.job) : signed.digest;
  const signature = signed.job ? signed.job.signature : signed.signature;
  return digest !== undefined && (await inspector.erc1271Valid(pre.payer, typeof digest === 'string' ? digest : bytesToHex(digest), signature)) ? 'contract' : undefined;
}

/**
 * Verifies a payment for its requirements in the reference order, short of simulation: first everything that needs
 * no chain ({@link precheckPayment}), then the asset's code and a contract payer's signature.
 */
export async function checkPayment(deps: VerifyDeps, request: VerifyRequest): Promise<Verdict> {
  const prechecked = await precheckPayment(deps, request);
  if (!prechecked.ok) return prechecked;
  const pre = prechecked.value;
  const inspector = deps.inspector(pre.network.caip2);
  const { payer, token, scheme } = pre;
  const assetMissing = () => refused(scheme.reasons.assetNotDeployed, `no contract at ${token.address}`, payer);
  if (scheme.assetCheckedFirst && !(await inspector.hasCode(token.address))) return assetMissing();
  const signer = await signedBy(inspector, pre);
  if (!signer) return refused(scheme.reasons.signature, "the signature is not the payer's", payer);
  if (!scheme.assetCheckedFirst && !(await inspector.hasCode(token.address))) return assetMissing();
  // A contract's code hash was read with its code (cached): no RPC more.
  const codeHash = signer === 'contract' ? await inspector.codeHash(payer) : undefined;
  // The scheme's own chain checks (a deposit's voucher, balance and channel), after those the reference makes first.
  const onChain = scheme.chainCheck ? await scheme.chainCheck(inspector, request, payer) : undefined;
  if (onChain && !onChain.ok) return onChain;
  const extra = onChain?.value;
  return ok({ payer, network: pre.network.caip2, kind: scheme.name, call: pre.call, signer, ...(codeHash ? { codeHash } : {}), ...(extra ? { extra } : {}) });
}

/** Runs exactly the settlement call a passed verdict would send; on a revert, says why as the reference would. */
export async function simulatePayment(deps: VerifyDeps, request: VerifyRequest, verdict: Verdict): Promise<Verdict> {
  if (!verdict.ok) return verdict;
  const v = verdict.value;
  // A key-signed payment's call costs what its contract's code costs: its gas bounds the batches of such calls.
  const sim = await deps.inspector(v.network).simulate(v.call, await deps.simulateFrom(v.network), v.signer === 'key' ? [v.call] : []);
  if (sim.ok) return ok({ ...v, gas: sim.value });
  return refused(await revertReason(deps, request, v.call), `simulation reverted: ${sim.error.message}`, v.payer);
}

/** Why the settlement call of `request` reverts (or reverted), in the reference's terms, read from the chain. */
export async function revertReason(deps: VerifyDeps, request: VerifyRequest, call: SettlementCall): Promise<InvalidReason> {
  const inspector = deps.inspector(request.paymentRequirements.network);
  const payload = request.paymentPayload.payload;
  return schemeOfPayload(payload).diagnoseRevert(inspector, call, payload);
}

/** The call that settles `request`, built as verification builds it; undefined for a network or asset not served. */
export function settlementCallOf(deps: Pick<VerifyDeps, 'networks'>, request: VerifyRequest): SettlementCall | undefined {
  const req = request.paymentRequirements;
  const token = deps.networks.stablecoinOn(req.network, req.asset);
  const network = deps.networks.find(req.network);
  const payload = request.paymentPayload.payload;
  if (!token || !network) return undefined;
  return schemeOfPayload(payload).settlementCall(payload, { network, token });
}

/** The whole of /verify: checks, then (unless switched off) simulation. */
export async function verifyPayment(deps: VerifyDeps, request: VerifyRequest, opts: { simulate: boolean }): Promise<Verdict> {
  const verdict = await checkPayment(deps, request);
  return opts.simulate ? simulatePayment(deps, request, verdict) : verdict;
}
