import { bytesToHex, type Address } from 'viem';
import type { NetworkRegistry } from '../chain/networks.ts';
import { isPermit2Payload, type VerifyRequest } from '../protocol/x402/types.ts';
import { checkEip3009Envelope, checkEip3009Terms, checkPermit2Terms, transferMethodOf } from '../verify/checks.ts';
import { Eip3009Reason, GatewayReason, Permit2Reason, type InvalidReason } from '../verify/reasons.ts';
import { jobDigest, type VerifyJob } from '../verify/signature/jobs.ts';
import { ChainInspector } from './chain-inspector.ts';
import { eip3009SettlementCall, permit2SettlementCall, type SettlementCall } from './settlement-call.ts';

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
  /** Who simulates the settlement (the relayer that would send it). */
  simulateFrom(caip2: string): Address;
}

export type Verdict =
  /** `signer`: the payer's own key signed, or (ERC-1271) a payer contract vouched for the signature. */
  | { ok: true; payer: Address; network: string; kind: 'eip3009' | 'permit2'; call: SettlementCall; signer: Signer; gas?: bigint }
  | { ok: false; reason: InvalidReason; message: string; payer?: Address };

const invalid = (reason: InvalidReason, message: string, payer?: Address): Verdict => ({ ok: false, reason, message, ...(payer ? { payer } : {}) });

type Signer = 'key' | 'contract';

/** Signature by the payer's key, or (for a payer with code) vouched for by the payer contract under ERC-1271. */
async function signedBy(deps: VerifyDeps, inspector: ChainInspector, job: VerifyJob, payer: Address): Promise<Signer | undefined> {
  const recovered = await deps.signatures.verify(job);
  if (recovered && recovered.toLowerCase() === payer.toLowerCase()) return 'key';
  if (!(await inspector.hasCode(payer))) return undefined;
  const digest = jobDigest(job);
  return digest !== undefined && (await inspector.erc1271Valid(payer, bytesToHex(digest), job.signature)) ? 'contract' : undefined;
}

/**
 * Verifies a payment for its requirements in the reference order, short of simulation. Unconfigured networks and
 * assets are refused before any chain is asked anything.
 */
export async function checkPayment(deps: VerifyDeps, request: VerifyRequest): Promise<Verdict> {
  const req = request.paymentRequirements;
  const accepted = request.paymentPayload.accepted;
  const network = deps.networks.find(req.network);
  if (!network) return invalid(GatewayReason.unsupportedNetwork, `network ${req.network} is not served here`);
  const token = deps.networks.stablecoinOn(req.network, req.asset);
  if (!token) return invalid(GatewayReason.unsupportedAsset, `asset ${req.asset} is not a configured stablecoin on ${req.network}`);
  const inspector = deps.inspector(req.network);
  const payload = request.paymentPayload.payload;
  const now = deps.now();

  if (transferMethodOf(req) === 'permit2') {
    if (!isPermit2Payload(payload)) return invalid(Permit2Reason.payloadType, 'requirements ask for a Permit2 payload');
    const proxy = network.exactPermit2Proxy;
    if (!proxy) return invalid(Permit2Reason.proxyNotDeployed, `no exact-permit proxy is configured on ${req.network}`);
    const payer = payload.permit2Authorization.from;
    const terms = checkPermit2Terms(req, accepted, payload, proxy, now);
    if (!terms.ok) return invalid(terms.reason, terms.message, payer);
    if (!(await inspector.hasCode(token.address))) return invalid(Permit2Reason.assetNotDeployed, `no contract at ${token.address}`, payer);
    const job: VerifyJob = { kind: 'permit2', domain: { chainId: network.chainId, ...(network.permit2 ? { verifyingContract: network.permit2 } : {}) }, permit: payload.permit2Authorization, signature: payload.signature };
    const signer = await signedBy(deps, inspector, job, payer);
    if (!signer) return invalid(Permit2Reason.signature, "the signature is not the payer's", payer);
    return { ok: true, payer, network: req.network, kind: 'permit2', call: permit2SettlementCall(proxy, payload), signer };
  }

  if (isPermit2Payload(payload)) return invalid(Eip3009Reason.scheme, 'requirements ask for an EIP-3009 authorization');
  const payer = payload.authorization.from;
  const envelope = checkEip3009Envelope(req, accepted);
  if (!envelope.ok) return invalid(envelope.reason, envelope.message, payer);
  const job: VerifyJob = {
    kind: 'eip3009',
    domain: { name: String(req.extra?.['name']), version: String(req.extra?.['version']), chainId: network.chainId, verifyingContract: token.address },
    authorization: payload.authorization,
    signature: payload.signature,
  };
  const signer = await signedBy(deps, inspector, job, payer);
  if (!signer) return invalid(Eip3009Reason.signature, "the signature is not the payer's", payer);
  const terms = checkEip3009Terms(req, payload, token, now);
  if (!terms.ok) return invalid(terms.reason, terms.message, payer);
  if (!(await inspector.hasCode(token.address))) return invalid(Eip3009Reason.assetNotDeployed, `no contract at ${token.address}`, payer);
  return { ok: true, payer, network: req.network, kind: 'eip3009', call: eip3009SettlementCall(token.address, payload), signer };
}

/** Runs exactly the settlement call a passed verdict would send; on a revert, says why as the reference would. */
export async function simulatePayment(deps: VerifyDeps, request: VerifyRequest, verdict: Verdict): Promise<Verdict> {
  if (!verdict.ok) return verdict;
  const sim = await deps.inspector(verdict.network).simulate(verdict.call, deps.simulateFrom(verdict.network));
  if (sim.ok) return { ...verdict, gas: sim.gas };
  return invalid(await revertReason(deps, request, verdict.call), `simulation reverted: ${sim.error}`, verdict.payer);
}

/** Why the settlement call of `request` reverts (or reverted), in the reference's terms, read from the chain. */
export async function revertReason(deps: VerifyDeps, request: VerifyRequest, call: SettlementCall): Promise<InvalidReason> {
  const inspector = deps.inspector(request.paymentRequirements.network);
  const payload = request.paymentPayload.payload;
  return isPermit2Payload(payload) ? inspector.diagnosePermit2(call.to, payload) : inspector.diagnoseEip3009(call.to, payload);
}

/** The call that settles `request`, built as verification builds it; undefined for a network or asset not served. */
export function settlementCallOf(deps: Pick<VerifyDeps, 'networks'>, request: VerifyRequest): SettlementCall | undefined {
  const req = request.paymentRequirements;
  const token = deps.networks.stablecoinOn(req.network, req.asset);
  const payload = request.paymentPayload.payload;
  if (!token) return undefined;
  if (!isPermit2Payload(payload)) return eip3009SettlementCall(token.address, payload);
  const proxy = deps.networks.find(req.network)?.exactPermit2Proxy;
  return proxy ? permit2SettlementCall(proxy, payload) : undefined;
}

/** The whole of /verify: checks, then (unless switched off) simulation. */
export async function verifyPayment(deps: VerifyDeps, request: VerifyRequest, opts: { simulate: boolean }): Promise<Verdict> {
  const verdict = await checkPayment(deps, request);
  return opts.simulate ? simulatePayment(deps, request, verdict) : verdict;
}
