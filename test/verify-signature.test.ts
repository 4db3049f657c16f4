import { randomBytes, randomInt } from 'node:crypto';
import { transferWithAuthorizationTypes } from './helpers/eip3009.ts';
import { permitWitnessTypes } from './helpers/permit2.ts';
import { EXACT_PERMIT2_PROXY_ADDRESS, PERMIT2_ADDRESS } from '../src/chain/canonical.ts';
import { spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import {
  bytesToHex,
  getAddress,
  hashTypedData,
  keccak256,
  parseSignature,
  recoverAddress,
  serializeCompactSignature,
  signatureToCompactSignature,
  type Address,
  type Hex,
  type LocalAccount,
} from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { eip3009Digest, eip3009DigestOfWords, permit2DigestOfWords, permit2WitnessDigest, typeHashes, type Eip3009Domain } from '../src/verify/signature/digest.ts';
import { ADDRESS_ASCII_BYTES, answerAt, encodeJob, JOB_RECORD_BYTES, recoverRecord, recoverRecords } from '../src/verify/signature/job-record.ts';
import { keccak256Bytes } from '../src/verify/signature/keccak.ts';
import { matchesSigner, recoverSigner, secp256k1Backend } from '../src/verify/signature/recover.ts';
import { jobDigest, recoverJobSync, type Eip3009Job, type Permit2Job, type VerifyJob } from '../src/verify/signature/jobs.ts';
import { SignatureVerifier } from '../src/verify/signature/pool.ts';
import { tempDir } from './helpers/temp-dir.ts';

// ---- independent statements of the typed data (protocols.md sections 2 and 3) ---------------------------------

const PERMIT2: Address = PERMIT2_ADDRESS;
const PROXY: Address = EXACT_PERMIT2_PROXY_ADDRESS;
const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

// The EIP-712 types, written out once for every test and bench (independently of the code under test).
const eip3009Types = transferWithAuthorizationTypes;
const permit2Types = permitWitnessTypes;

// ---- random inputs -----------------------------------------------------------------------------------------------

/** A random address, checksummed or lower-case at random (the digests must not depend on letter case). */
function randomAddress(): Address {
  const a = getAddress(bytesToHex(randomBytes(20)));
  return randomInt(2) === 0 ? a : (a.toLowerCase() as Address);
}
/** A uint256 of random byte length (so 0, small and full-width values all occur). */
function randomUint256(): bigint {
  const len = randomInt(33);
  return len === 0 ? 0n : BigInt(bytesToHex(randomBytes(len)));
}
const bytes32 = (): Hex => bytesToHex(randomBytes(32));
function randomName(): string {
  const alphabet = ['USD Coin', 'USDC', ':', 'é', '€', '💵', ' ', 'x', '2', ''];
  let s = '';
  for (let i = randomInt(6); i > 0; i--) s += alphabet[randomInt(alphabet.length)];
  return s;
}
function randomEip3009Domain(): Eip3009Domain & { chainId: number } {
  return { name: randomName(), version: randomName(), chainId: randomInt(1, 2 ** 40), verifyingContract: randomAddress() };
}
function randomAuthorization(from: Address = randomAddress()) {
  return { from, to: randomAddress(), value: randomUint256(), validAfter: randomUint256(), validBefore: randomUint256(), nonce: bytes32() };
}
function randomPermit(): Permit2Job['permit'] & { permitted: { amount: bigint }; nonce: bigint; deadline: bigint; witness: { validAfter: bigint } } {
  return {
    permitted: { token: randomAddress(), amount: randomUint256() },
    spender: randomAddress(),
    nonce: randomUint256(),
    deadline: randomUint256(),
    witness: { to: randomAddress(), validAfter: randomUint256() },
  };
}
const flat = (p: ReturnType<typeof randomPermit>) => ({
  token: p.permitted.token,
  amount: p.permitted.amount,
  spender: p.spender,
  nonce: p.nonce,
  deadline: p.deadline,
  witnessTo: p.witness.to,
  witnessValidAfter: p.witness.validAfter,
});
const bigintReplacer = (_k: string, v: unknown): unknown => (typeof v === 'bigint' ? v.toString() : v);
/** The same uint256 fields as decimal strings (the x402 wire form). */
function asStrings<T extends object>(o: T): T {
  return JSON.parse(JSON.stringify(o, bigintReplacer)) as T;
}

async function signEip3009(account: LocalAccount, domain: Eip3009Domain = { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: randomAddress() }): Promise<Eip3009Job> {
  const authorization = randomAuthorization(account.address);
  const signature = await account.signTypedData({ domain: { ...domain, chainId: Number(domain.chainId) }, types: eip3009Types, primaryType: 'TransferWithAuthorization', message: authorization });
  return { kind: 'eip3009', domain, authorization, signature };
}
async function signPermit2(account: LocalAccount, chainId = 4663): Promise<Permit2Job> {
  const p = randomPermit();
  p.spender = PROXY;
  const signature = await account.signTypedData({ domain: { name: 'Permit2', chainId, verifyingContract: PERMIT2 }, types: permit2Types, primaryType: 'PermitWitnessTransferFrom', message: p });
  return { kind: 'permit2', domain: { chainId }, permit: { from: account.address, ...p }, signature };
}

// ---- tests -----------------------------------------------------------------------------------------------------

t.test('keccak-256 and the type hashes', async (t) => {
  for (let len = 0; len <= 300; len++) {
    const data = new Uint8Array(randomBytes(len));
    if (bytesToHex(keccak256Bytes(data)) !== keccak256(data)) t.fail(`keccak of ${len} bytes`);
  }
  t.pass('keccak256Bytes equals viem keccak256 for lengths 0..300 (across the 136-byte block boundaries)');
  // Inputs longer than the module's input area go in chunks of 400 blocks (54,400 bytes).
  for (const len of [54_399, 54_400, 54_401, 54_400 + 136, 2 * 54_400 + 7, 200_000]) {
    const data = new Uint8Array(randomBytes(len));
    t.equal(bytesToHex(keccak256Bytes(data)), keccak256(data), `keccak of ${len} bytes`);
  }
  const data = new Uint8Array(randomBytes(400));
  const out = new Uint8Array(40);
  t.equal(keccak256Bytes(data.subarray(7, 300), out, 5), out, 'writes into the given array');
  t.equal(bytesToHex(out.subarray(5, 37)), keccak256(data.subarray(7, 300)), 'of a subarray, at an offset');
  const h = typeHashes();
  t.equal(bytesToHex(h.permitWitnessTransferFrom), '0xebc156cd23678a74c94df13d772ef5478420637f0c94bd10d509e1dc98f521c7');
  t.equal(bytesToHex(h.witness), '0xd97b3239a7f32295517bd14cb074edfdd188dfe5eb42f802bb26d4fd1eb12c37');
  t.equal(bytesToHex(h.eip712Domain), '0x8b73c3c69bb8fe3d512ecc4cf759cc79239f7b179b0ffacaa9a75d522b39400f');
  t.equal(secp256k1Backend, 'native', 'libsecp256k1 native binding is loaded');
});

t.test('EIP-3009 digests equal viem hashTypedData on random inputs', async (t) => {
  for (let i = 0; i < 300; i++) {
    const domain = randomEip3009Domain();
    const a = randomAuthorization();
    const expected = hashTypedData({ domain, types: eip3009Types, primaryType: 'TransferWithAuthorization', message: a });
    const got = bytesToHex(eip3009Digest(domain, a));
    if (got !== expected) t.fail(`digest mismatch for ${JSON.stringify(asStrings({ domain, a }))}`);
    if (bytesToHex(eip3009Digest(asStrings(domain), asStrings(a))) !== expected) t.fail('decimal-string form differs');
  }
  t.pass('300 random domains and authorizations (bigint and decimal-string forms)');
  // Same domain again comes from the cache and still matches.
  const domain = { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: randomAddress() };
  for (let i = 0; i < 3; i++) {
    const a = randomAuthorization();
    t.equal(bytesToHex(eip3009Digest(domain, a)), hashTypedData({ domain, types: eip3009Types, primaryType: 'TransferWithAuthorization', message: a }));
  }
  // A ':' in the name cannot alias another domain in the separator cache.
  const a = randomAuthorization();
  const d1 = { name: 'a:b', version: 'c', chainId: 1, verifyingContract: domain.verifyingContract };
  const d2 = { name: 'a', version: 'b:c', chainId: 1, verifyingContract: domain.verifyingContract };
  t.not(bytesToHex(eip3009Digest(d1, a)), bytesToHex(eip3009Digest(d2, a)));
  t.equal(bytesToHex(eip3009Digest(d2, a)), hashTypedData({ domain: d2, types: eip3009Types, primaryType: 'TransferWithAuthorization', message: a }));
});

t.test('Permit2 witness digests equal viem hashTypedData on random inputs', async (t) => {
  for (let i = 0; i < 300; i++) {
    const chainId = randomInt(1, 2 ** 40);
    const verifyingContract = i % 2 === 0 ? PERMIT2 : randomAddress();
    const p = randomPermit();
    const expected = hashTypedData({ domain: { name: 'Permit2', chainId, verifyingContract }, types: permit2Types, primaryType: 'PermitWitnessTransferFrom', message: p });
    if (bytesToHex(permit2WitnessDigest({ chainId, verifyingContract }, flat(p))) !== expected) t.fail(`digest mismatch for ${JSON.stringify(asStrings(p))}`);
    if (bytesToHex(permit2WitnessDigest({ chainId: String(chainId), verifyingContract }, asStrings(flat(p)))) !== expected) t.fail('decimal-string form differs');
  }
  t.pass('300 random permits');
});

t.test('malformed digest inputs throw a TypeError (the try* and job paths return undefined instead)', async (t) => {
  const domain = randomEip3009Domain();
  const good = randomAuthorization();
  const bad: Record<string, unknown>[] = [
    { value: -1n },
    { value: 1n << 256n },
    { value: '0x10' },
    { value: '1e3' },
    { value: '' },
    { value: 1.5 },
    { nonce: '0x1234' },
    { nonce: `0x${'zz'.repeat(32)}` },
    { from: '0x1234' },
    { to: `${'0'.repeat(42)}` },
    { to: undefined },
  ];
  for (const patch of bad) t.throws(() => eip3009Digest(domain, { ...good, ...patch } as never), TypeError, JSON.stringify(asStrings(patch)));
  t.throws(() => eip3009Digest({ ...domain, chainId: -1 }, good), TypeError);
  t.throws(() => permit2WitnessDigest({ chainId: 1, verifyingContract: '0x00' }, flat(randomPermit())), TypeError);
});

t.test('recovery returns the signing account, in every accepted signature form', async (t) => {
  for (let i = 0; i < 12; i++) {
    const account = privateKeyToAccount(generatePrivateKey());
    const jobs: VerifyJob[] = [await signEip3009(account, randomEip3009Domain()), await signPermit2(account, randomInt(1, 100000))];
    for (const job of jobs) {
      t.equal(recoverJobSync(job), account.address, `${job.kind}: 65-byte signature, v in {27, 28}`);
      t.equal(recoverJobSync(asStrings(job)), account.address, `${job.kind}: wire form with decimal strings`);
      const { r, s, yParity } = parseSignature(job.signature);
      const v01 = `${job.signature.slice(0, 130)}${yParity === 0 ? '00' : '01'}` as Hex;
      t.equal(recoverJobSync({ ...job, signature: v01 }), account.address, `${job.kind}: v in {0, 1}`);
      const compact = serializeCompactSignature(signatureToCompactSignature({ r, s, yParity }));
      t.equal(compact.length, 130);
      t.equal(recoverJobSync({ ...job, signature: compact }), account.address, `${job.kind}: 64-byte EIP-2098 compact`);
      t.equal(recoverJobSync({ ...job, signature: job.signature.toUpperCase().replace('0X', '0x') as Hex }), account.address, 'upper-case hex');
      t.ok(matchesSigner(recoverJobSync(job), account.address.toLowerCase()), 'matchesSigner is case-insensitive');
    }
  }
});

t.test('wrong key, tampered fields, high s, bad v, bad length and garbage: undefined or another address, never a throw', async (t) => {
  const signer = privateKeyToAccount(generatePrivateKey());
  const other = privateKeyToAccount(generatePrivateKey());
  const e = await signEip3009(signer);
  const p = await signPermit2(signer);

  // Signed by another key while claiming `signer`.
  const forged = await signEip3009(other, e.domain);
  forged.authorization = { ...forged.authorization, from: signer.address };
  const forgedRecovered = recoverJobSync(forged);
  t.not(forgedRecovered, signer.address);
  t.notOk(matchesSigner(forgedRecovered, signer.address), 'another key does not match the claimed signer');

  // Any field changed after signing recovers some other address (or nothing).
  const ea = e.authorization;
  const eTampered: Eip3009Job[] = [
    { ...e, authorization: { ...ea, value: BigInt(ea.value) + 1n } },
    { ...e, authorization: { ...ea, to: randomAddress() } },
    { ...e, authorization: { ...ea, validBefore: BigInt(ea.validBefore) + 1n } },
    { ...e, authorization: { ...ea, validAfter: BigInt(ea.validAfter) ^ 1n } },
    { ...e, authorization: { ...ea, nonce: bytes32() } },
    { ...e, authorization: { ...ea, from: other.address } }, // `from` is part of the message too
    { ...e, domain: { ...e.domain, chainId: 84532 } },
    { ...e, domain: { ...e.domain, name: 'USDC' } },
    { ...e, domain: { ...e.domain, version: '1' } },
    { ...e, domain: { ...e.domain, verifyingContract: randomAddress() } },
  ];
  const pp = p.permit;
  const pTampered: Permit2Job[] = [
    { ...p, permit: { ...pp, permitted: { ...pp.permitted, amount: BigInt(pp.permitted.amount) + 1n } } },
    { ...p, permit: { ...pp, permitted: { ...pp.permitted, token: randomAddress() } } },
    { ...p, permit: { ...pp, spender: randomAddress() } },
    { ...p, permit: { ...pp, nonce: BigInt(pp.nonce) ^ 1n } },
    { ...p, permit: { ...pp, deadline: BigInt(pp.deadline) + 1n } },
    { ...p, permit: { ...pp, witness: { ...pp.witness, to: randomAddress() } } },
    { ...p, permit: { ...pp, witness: { ...pp.witness, validAfter: BigInt(pp.witness.validAfter) + 1n } } },
    { ...p, domain: { chainId: 1 } },
    { ...p, domain: { chainId: p.domain.chainId, verifyingContract: randomAddress() } },
  ];
  for (const job of [...eTampered, ...pTampered]) t.not(recoverJobSync(job), signer.address, `tampered ${job.kind}`);
  // `from` of a Permit2 authorization is not signed: changing it changes nothing (the caller compares it).
  t.equal(recoverJobSync({ ...p, permit: { ...pp, from: other.address } }), signer.address);

  // High s: (r, n - s) with the other parity is the same key's valid signature in secp256k1, but contracts refuse it.
  for (const job of [e, p] as VerifyJob[]) {
    const { r, s, yParity } = parseSignature(job.signature);
    const highS = (N - BigInt(s)).toString(16).padStart(64, '0');
    const malleated = `${r}${highS}${yParity === 0 ? '1c' : '1b'}` as Hex;
    const digest =
      job.kind === 'eip3009'
        ? hashTypedData({ domain: { ...job.domain, chainId: Number(job.domain.chainId) }, types: eip3009Types, primaryType: 'TransferWithAuthorization', message: job.authorization as never })
        : hashTypedData({ domain: { name: 'Permit2', chainId: 4663, verifyingContract: PERMIT2 }, types: permit2Types, primaryType: 'PermitWitnessTransferFrom', message: job.permit as never });
    t.equal(await recoverAddress({ hash: digest, signature: malleated }), signer.address, 'the malleated signature is otherwise valid');
    t.equal(recoverJobSync({ ...job, signature: malleated }), undefined, `${job.kind}: high s refused`);
  }

  const sig = e.signature;
  const badSignatures: unknown[] = [
    `${sig.slice(0, 130)}1d`, // v = 29
    `${sig.slice(0, 130)}1a`, // v = 26
    `${sig.slice(0, 130)}02`, // v = 2
    `${sig.slice(0, 130)}ff`,
    sig.slice(0, 131), // odd length
    sig.slice(0, 128), // 63 bytes
    `${sig}00`, // 66 bytes
    sig.slice(2), // no 0x
    `0y${sig.slice(2)}`,
    `0x${'g'.repeat(130)}`,
    `0x${'00'.repeat(65)}`, // r = s = 0
    `0x${'ff'.repeat(32)}${sig.slice(66)}`, // r >= n
    `0x${'00'.repeat(32)}${sig.slice(66)}`, // r = 0
    `${sig.slice(0, 66)}${'00'.repeat(32)}1b`, // s = 0
    `0x${'00'.repeat(64)}`, // compact all zero
    '0x',
    '',
    `0x${'１'.repeat(130)}`, // non-ASCII digits
    null,
    undefined,
    1234,
    {},
    [],
    Symbol('x'),
  ];
  for (const bad of badSignatures) {
    const label = typeof bad === 'symbol' ? 'symbol' : (JSON.stringify(bad) ?? String(bad));
    t.equal(recoverJobSync({ ...e, signature: bad as Hex }), undefined, `signature ${label.slice(0, 40)}`);
  }
  // A point that does not exist: r with no matching curve point for that x.
  t.equal(recoverSigner(new Uint8Array(32), `0x${'00'.repeat(31)}05${'00'.repeat(31)}011b`), undefined, 'r = 5 (x not on curve)');
  t.equal(recoverSigner(new Uint8Array(31), sig), undefined, 'digest of 31 bytes');
  t.equal(recoverSigner('0x00' as never, sig), undefined, 'digest not bytes');

  const garbageJobs: unknown[] = [
    null,
    undefined,
    42,
    'eip3009',
    {},
    { kind: 'other', signature: sig },
    { kind: 'eip3009' },
    { kind: 'eip3009', domain: null, authorization: ea, signature: sig },
    { kind: 'eip3009', domain: e.domain, authorization: null, signature: sig },
    { kind: 'eip3009', domain: { ...e.domain, chainId: 'x' }, authorization: ea, signature: sig },
    { kind: 'eip3009', domain: { ...e.domain, name: 5 }, authorization: ea, signature: sig },
    { kind: 'eip3009', domain: e.domain, authorization: { ...ea, value: '-5' }, signature: sig },
    { kind: 'eip3009', domain: e.domain, authorization: { ...ea, value: {} }, signature: sig },
    { kind: 'permit2', domain: p.domain, permit: null, signature: p.signature },
    { kind: 'permit2', domain: null, permit: pp, signature: p.signature },
    { kind: 'permit2', domain: p.domain, permit: { ...pp, permitted: null }, signature: p.signature },
    { kind: 'permit2', domain: p.domain, permit: { ...pp, witness: 'x' }, signature: p.signature },
    {
      kind: 'eip3009',
      domain: e.domain,
      get authorization(): never {
        throw new Error('hostile getter');
      },
      signature: sig,
    },
  ];
  for (const [i, job] of garbageJobs.entries()) t.equal(recoverJobSync(job as VerifyJob), undefined, `garbage job #${i}`);
  t.notOk(matchesSigner(undefined, signer.address));
  t.notOk(matchesSigner(signer.address, undefined));
});

/**
 * Every kind of job the recovery tests use, for one EIP-3009 and one Permit2 signature by `signer`: accepted
 * signature forms, tampered fields and domains (another chain, name, version, contract), high s, bad v, bad lengths,
 * garbage signatures and garbage jobs; each with what it must recover to.
 */
async function jobCorpus(signer: LocalAccount): Promise<{ job: VerifyJob; want: Address | 'other' | undefined; label: string }[]> {
  const e = await signEip3009(signer);
  const p = await signPermit2(signer);
  const out: { job: VerifyJob; want: Address | 'other' | undefined; label: string }[] = [];
  for (const job of [e, p] as VerifyJob[]) {
    const { r, s, yParity } = parseSignature(job.signature);
    const v = yParity === 0 ? '1b' : '1c';
    out.push({ job, want: signer.address, label: `${job.kind}` });
    out.push({ job: asStrings(job), want: signer.address, label: `${job.kind} wire form` });
    out.push({ job: { ...job, signature: `${job.signature.slice(0, 130)}0${yParity}` as Hex }, want: signer.address, label: `${job.kind} v in {0, 1}` });
    out.push({ job: { ...job, signature: serializeCompactSignature(signatureToCompactSignature({ r, s, yParity })) }, want: signer.address, label: `${job.kind} EIP-2098` });
    out.push({ job: { ...job, signature: job.signature.toUpperCase().replace('0X', '0x') as Hex }, want: signer.address, label: `${job.kind} upper case` });
    out.push({ job: { ...job, signature: `${r}${s.slice(2)}${v.toUpperCase()}` as Hex }, want: signer.address, label: `${job.kind} upper-case v` });
    out.push({ job: { ...job, signature: `${r}${s.slice(2)}${yParity === 0 ? '1c' : '1b'}` as Hex }, want: 'other', label: `${job.kind} the other parity` });
    const highS = (N - BigInt(s)).toString(16).padStart(64, '0');
    out.push({ job: { ...job, signature: `${r}${highS}${yParity === 0 ? '1c' : '1b'}` as Hex }, want: undefined, label: `${job.kind} high s` });
    // EIP-2098 holds s in 255 bits: 2^255 - 1 is above n/2, with either parity bit.
    out.push({ job: { ...job, signature: `${r}7f${'ff'.repeat(31)}` as Hex }, want: undefined, label: `${job.kind} EIP-2098 high s, parity 0` });
    out.push({ job: { ...job, signature: `${r}${'ff'.repeat(32)}` as Hex }, want: undefined, label: `${job.kind} EIP-2098 high s, parity 1` });
    for (const bad of ['1d', '1a', '02', '11', 'ff', '1g', '0b', 'b1']) out.push({ job: { ...job, signature: `${r}${s.slice(2)}${bad}` as Hex }, want: undefined, label: `${job.kind} v ${bad}` });
    for (const bad of [
      job.signature.slice(0, 131),
      job.signature.slice(0, 128),
      `${job.signature}00`,
      job.signature.slice(2),
      `0y${job.signature.slice(2)}`,
      `0x${'00'.repeat(65)}`,
      `0x${'ff'.repeat(32)}${s.slice(2)}${v}`,
      '0x',
      null,
      7,
    ])
      out.push({ job: { ...job, signature: bad as Hex }, want: undefined, label: `${job.kind} signature ${String(bad).slice(0, 12)}` });
  }
  out.push({ job: { ...e, domain: { ...e.domain, chainId: 84532 } }, want: 'other', label: 'EIP-3009 on another chain' });
  out.push({ job: { ...e, domain: { ...e.domain, name: 'USDC' } }, want: 'other', label: 'EIP-3009 under another name' });
  out.push({ job: { ...e, domain: { ...e.domain, version: '1' } }, want: 'other', label: 'EIP-3009 under another version' });
  out.push({ job: { ...e, domain: { ...e.domain, verifyingContract: randomAddress() } }, want: 'other', label: 'EIP-3009 for another token' });
  out.push({ job: { ...e, domain: { ...e.domain, verifyingContract: e.domain.verifyingContract.toLowerCase() as Address } }, want: signer.address, label: 'EIP-3009, contract in lower case' });
  out.push({ job: { ...e, authorization: { ...e.authorization, value: BigInt(e.authorization.value) + 1n } }, want: 'other', label: 'EIP-3009 value + 1' });
  out.push({ job: { ...p, domain: { chainId: 1 } }, want: 'other', label: 'Permit2 on another chain' });
  out.push({ job: { ...p, domain: { chainId: p.domain.chainId, verifyingContract: randomAddress() } }, want: 'other', label: 'Permit2 at another contract' });
  out.push({ job: { ...p, domain: { chainId: String(p.domain.chainId), verifyingContract: PERMIT2 } }, want: signer.address, label: 'Permit2, chain id as a string, contract explicit' });
  out.push({ job: { ...p, permit: { ...p.permit, nonce: BigInt(p.permit.nonce) + 1n } }, want: 'other', label: 'Permit2 nonce + 1' });
  out.push({ job: { ...p, permit: { ...p.permit, from: randomAddress() } }, want: signer.address, label: 'Permit2 from is not signed' });
  const garbage: unknown[] = [
    null,
    42,
    {},
    { kind: 'other', signature: e.signature },
    { ...e, kind: 'permit2' },
    { ...p, kind: 'eip3009' },
    { ...e, domain: { ...e.domain, chainId: -1 } },
    { ...e, domain: { ...e.domain, chainId: 2 ** 53 } },
    { ...e, authorization: { ...e.authorization, value: '-1' } },
    { ...e, authorization: { ...e.authorization, value: 1.5 } },
    { ...e, authorization: { ...e.authorization, value: `1${'0'.repeat(78)}` } },
    { ...e, authorization: { ...e.authorization, nonce: '0x12' } },
    { ...p, permit: { ...p.permit, witness: null } },
    { ...p, permit: { ...p.permit, spender: 'proxy' } },
  ];
  for (const [i, job] of garbage.entries()) out.push({ job: job as VerifyJob, want: undefined, label: `garbage job #${i}` });
  return out;
}

t.test('the pool, in workers and in-process, answers every accepted, tampered and malformed job exactly as recoverJobSync', async (t) => {
  const signer = privateKeyToAccount(generatePrivateKey());
  const corpus = await jobCorpus(signer);
  const matches = (got: Address | undefined, want: Address | 'other' | undefined) => (want === 'other' ? got !== undefined && got !== signer.address : got === want);
  for (const { job, want, label } of corpus) if (!matches(recoverJobSync(job), want)) t.fail(`recoverJobSync: ${label}`);
  for (const threads of [2, 0]) {
    const verifier = new SignatureVerifier({ threads, maxBatch: 16 });
    const got = await Promise.all(corpus.map(({ job }) => verifier.verify(job)));
    let wrong = 0;
    corpus.forEach(({ job, want, label }, i) => {
      if (got[i] !== recoverJobSync(job) || !matches(got[i], want)) {
        wrong++;
        t.fail(`threads ${threads}: ${label}`);
      }
    });
    t.equal(wrong, 0, `threads ${threads}: all ${corpus.length} jobs answered as recoverJobSync and as expected`);
    t.equal(verifier.stats.workerFailures, 0);
    await verifier.close();
  }
});

t.test('job records: what encodeJob writes and recoverRecord reads', async (t) => {
  const signer = privateKeyToAccount(generatePrivateKey());
  const e = await signEip3009(signer);
  const p = await signPermit2(signer);
  const record = (job: VerifyJob): Uint8Array | undefined => {
    const out = new Uint8Array(JOB_RECORD_BYTES);
    return encodeJob(job, out, new DataView(out.buffer), 0) ? out : undefined;
  };
  const answer = (rec: Uint8Array): string | undefined => {
    const out = new Uint8Array(ADDRESS_ASCII_BYTES);
    return recoverRecord(rec, 0, out, 0) ? Buffer.from(out).toString('latin1') : undefined;
  };
  for (const job of [e, p] as VerifyJob[]) {
    const rec = record(job) as Uint8Array;
    t.equal(answer(rec), signer.address, `${job.kind}: the record recovers the signer`);
    // The record holds the digest's inputs: the separator at [32, 64) and the message words at [128, ...).
    const digest = job.kind === 'eip3009' ? eip3009DigestOfWords(rec, 32, rec, 128) : permit2DigestOfWords(rec, 32, rec, 128);
    t.equal(bytesToHex(digest), bytesToHex(jobDigest(job) as Uint8Array), `${job.kind}: the record's digest is the job's`);
    t.same(record(asStrings(job)), rec, `${job.kind}: decimal strings encode as bigints do`);
    t.same(record({ ...job, signature: job.signature.toUpperCase().replace('0X', '0x') as Hex }), rec, `${job.kind}: hex letter case does not matter`);
    // A record that encodeJob never writes is refused, not recovered.
    for (const [at, value, what] of [
      [0, 0, 'kind 0'],
      [0, 3, 'kind 3'],
      [1, 2, 'recovery id 2'],
      [1, 255, 'recovery id 255'],
    ] as const) {
      const bad = rec.slice();
      bad[at] = value;
      t.equal(answer(bad), undefined, `${job.kind}: ${what}`);
    }
    // The other recovery id recovers another key (or none), as the other v does.
    const flipped = rec.slice();
    flipped[1] = 1 - (flipped[1] as number);
    t.not(answer(flipped), signer.address, `${job.kind}: the other recovery id`);
  }
  const lower = record({ ...e, authorization: { ...e.authorization, from: e.authorization.from.toLowerCase() as Address } });
  t.same(lower, record(e), 'address letter case does not matter');
  // r = 0 encodes (it is well-formed hex) but no key recovers.
  const zeroR = record({ ...e, signature: `0x${'00'.repeat(32)}${e.signature.slice(66)}` as Hex }) as Uint8Array;
  t.ok(zeroR, 'r = 0 is encoded');
  t.equal(answer(zeroR), undefined, 'r = 0 recovers nothing');
  t.equal(record({ ...e, signature: `${e.signature.slice(0, 130)}1d` as Hex }), undefined, 'v = 29 is refused by encodeJob');
  // A batch answer string: 42 characters per job, NUL-filled where nothing recovers.
  const batch = new Uint8Array(3 * JOB_RECORD_BYTES);
  batch.set(record(e) as Uint8Array, 0);
  batch.set(zeroR, JOB_RECORD_BYTES);
  batch.set(record(p) as Uint8Array, 2 * JOB_RECORD_BYTES);
  const answers = recoverRecords(batch, 3, Buffer.alloc(3 * ADDRESS_ASCII_BYTES));
  t.same([answerAt(answers, 0), answerAt(answers, 1), answerAt(answers, 2)], [signer.address, undefined, signer.address]);
  t.throws(() => recoverRecords(batch, 4, Buffer.alloc(4 * ADDRESS_ASCII_BYTES)), RangeError, 'a count beyond the records');
});

t.test('uint256 fields at the edges of the BigInt-free fast path equal viem', async (t) => {
  const domain = { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: randomAddress() };
  const values: (bigint | number | string)[] = [
    '0',
    '7',
    '000123',
    '999999999999999',
    '1000000000000000',
    '9007199254740991',
    '9007199254740992',
    Number.MAX_SAFE_INTEGER,
    0,
    2 ** 32,
    2 ** 32 - 1,
    2 ** 52 + 1,
    `${(1n << 256n) - 1n}`,
    `${1n << 64n}`,
  ];
  for (const value of values) {
    const a = { ...randomAuthorization(), value: value as unknown as bigint, validAfter: value as unknown as bigint };
    const expected = hashTypedData({ domain, types: eip3009Types, primaryType: 'TransferWithAuthorization', message: { ...a, value: BigInt(value), validAfter: BigInt(value) } });
    t.equal(bytesToHex(eip3009Digest(domain, a)), expected, `${typeof value} ${String(value)}`);
  }
  for (const value of [2 ** 53, -1, -0.5, Number.NaN, Infinity, '-1', '+1', ' 1', '1 ', '1_000', '0x1', '1e3', '', '١٢٣', `${1n << 256n}`]) {
    t.throws(() => eip3009Digest(domain, { ...randomAuthorization(), value: value as unknown as bigint }), TypeError, `${typeof value} ${JSON.stringify(String(value))}`);
  }
});

t.test('the pool answers 2,000 concurrent mixed jobs correctly and in order, then close() ends the workers', async (t) => {
  const accounts = Array.from({ length: 8 }, () => privateKeyToAccount(generatePrivateKey()));
  const signed: VerifyJob[] = [];
  for (const account of accounts) signed.push(await signEip3009(account), await signEip3009(account, randomEip3009Domain()), await signPermit2(account));
  const signerOf = (job: VerifyJob): Address => (job.kind === 'eip3009' ? job.authorization.from : (job.permit.from as Address));

  const jobs: VerifyJob[] = [];
  const expected: (Address | 'other' | undefined)[] = [];
  for (let i = 0; i < 2000; i++) {
    const base = signed[i % signed.length] as VerifyJob;
    switch (i % 7) {
      case 3: // tampered: recovers someone else
        jobs.push(
          base.kind === 'eip3009'
            ? { ...base, authorization: { ...base.authorization, value: BigInt(base.authorization.value) + 1n } }
            : { ...base, permit: { ...base.permit, nonce: BigInt(base.permit.nonce) + 1n } },
        );
        expected.push('other');
        break;
      case 5: // malformed signature
        jobs.push({ ...base, signature: `${base.signature.slice(0, 130)}1f` as Hex });
        expected.push(undefined);
        break;
      case 6: // wire form
        jobs.push(asStrings(base));
        expected.push(signerOf(base));
        break;
      default:
        jobs.push(base);
        expected.push(signerOf(base));
    }
  }
  jobs.push({ kind: 'eip3009' } as VerifyJob);
  expected.push(undefined);

  const verifier = new SignatureVerifier({ threads: 2, maxBatch: 64, maxDelayMicros: 200 });
  t.equal(verifier.stats.liveThreads, 2);
  const results = await Promise.all(jobs.map((job) => verifier.verify(job)));
  let wrong = 0;
  for (let i = 0; i < jobs.length; i++) {
    const want = expected[i];
    const got = results[i];
    const ok = want === 'other' ? got !== undefined && got !== signerOf(jobs[i] as VerifyJob) && got === recoverJobSync(jobs[i] as VerifyJob) : got === want;
    if (!ok) wrong++;
  }
  t.equal(wrong, 0, `all ${jobs.length} results correct and in order`);
  const stats = verifier.stats;
  t.equal(stats.jobs, jobs.length);
  t.equal(stats.workerFailures, 0);
  // Malformed jobs (a bad v, the garbage job) are answered without a worker; the rest go in batches.
  const sent = expected.filter((e) => e !== undefined).length;
  t.ok(stats.batches >= Math.ceil(sent / 64) && stats.batches < sent / 4, `batched: ${stats.batches} tasks for ${sent} jobs`);

  // Only a job's fields are read: one that carries anything else (even a function) is verified like any other.
  const mixed = await Promise.all([verifier.verify(signed[1] as VerifyJob), verifier.verify({ ...(signed[2] as VerifyJob), hook: () => 1 } as unknown as VerifyJob)]);
  t.same(mixed, [signerOf(signed[1] as VerifyJob), signerOf(signed[2] as VerifyJob)], 'a job with an extra function property is verified');
  t.equal(verifier.stats.workerFailures, 0);
  // A malformed job is answered without a batch.
  const batches = verifier.stats.batches;
  t.equal(await verifier.verify({ ...(signed[0] as VerifyJob), signature: '0x1234' }), undefined);
  t.equal(verifier.stats.batches, batches, 'no batch for a malformed job');

  // Jobs accepted before close() are still answered; afterwards verify() rejects and no worker is left.
  const late = verifier.verify(signed[0] as VerifyJob);
  await verifier.close();
  t.equal(await late, signerOf(signed[0] as VerifyJob));
  t.equal(verifier.stats.liveThreads, 0, 'worker threads ended');
  await t.rejects(verifier.verify(signed[0] as VerifyJob), /closed/);
  await verifier.close(); // idempotent
});

t.test('threads: 0 verifies in-process, batched the same way', async (t) => {
  const account = privateKeyToAccount(generatePrivateKey());
  const job = await signPermit2(account);
  const verifier = new SignatureVerifier({ threads: 0, maxBatch: 8 });
  const results = await Promise.all(Array.from({ length: 20 }, (_, i) => verifier.verify(i % 2 === 0 ? job : { ...job, signature: '0x' })));
  t.same(
    results,
    Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? account.address : undefined)),
  );
  t.equal(verifier.stats.batches, 2, 'the 10 signed jobs in batches of at most 8; the 10 malformed ones need none');
  await verifier.close();
  t.throws(() => new SignatureVerifier({ threads: -1 }), RangeError);
  t.throws(() => new SignatureVerifier({ maxBatch: 0 }), RangeError);
});

/**
 * Runs `body` in a child Node process without `--import tsx` (as src/cli/bin.mjs runs): the script registers tsx
 * through its API and imports the pool as `SignatureVerifier`; `job` is `process.argv[2]`'s JSON. `nodeArgs` go
 * before the script (`{dir}` is the directory `files` are written to). Returns the child's stdout parsed as JSON.
 */
function runChild(t: Test, body: string, job: VerifyJob, nodeArgs: string[] = [], files: Record<string, string> = {}): unknown {
  const dir = tempDir('verify');
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  const script = join(dir, 'child.mjs');
  writeFileSync(
    script,
    `import { register } from ${JSON.stringify(import.meta.resolve('tsx/esm/api'))};
    register();
    const { SignatureVerifier } = await import(${JSON.stringify(new URL('../src/verify/signature/pool.ts', import.meta.url).href)});
    const job = JSON.parse(process.argv[2]);
    ${body}`,
  );
  const started = Date.now();
  const child = spawnSync(process.execPath, [...nodeArgs.map((a) => a.replace('{dir}', dir)), script, JSON.stringify(job)], {
    encoding: 'utf8',
    timeout: 30_000,
    env: { ...process.env, NODE_OPTIONS: '' },
  });
  t.equal(child.status, 0, child.stderr);
  t.equal(child.signal, null, `exited by itself after ${Date.now() - started} ms`);
  return JSON.parse(child.stdout) as unknown;
}

t.test('workers load TypeScript when the parent registered tsx programmatically (as src/cli/bin.mjs does)', async (t) => {
  const account = privateKeyToAccount(generatePrivateKey());
  const job = asStrings(await signEip3009(account));
  const out = runChild(
    t,
    `const v = new SignatureVerifier({ threads: 1 });
    const r = await Promise.all([v.verify(job), v.verify({ kind: 'eip3009' })]);
    await v.close();
    console.log(JSON.stringify({ r, execArgv: process.execArgv }));`,
    job,
  );
  t.same(out, { r: [account.address, null], execArgv: [] }, 'the worker verified without inheriting --import tsx');
  // Idle workers do not keep a process alive: one that never closes its verifier still exits once its work is done.
  const unclosed = runChild(t, `new SignatureVerifier({ threads: 2 }).verify(job).then((address) => console.log(JSON.stringify(address)));`, job);
  t.equal(unclosed, account.address, 'a job in flight keeps the process alive until it is answered');
});

t.test('workers that cannot load their code: every batch is verified in-process, and counted', async (t) => {
  // Every thread of the child gets a module hook that refuses `tsx/esm/api`: the main thread registers tsx before
  // (by URL), a worker thread needs it to load worker.ts and cannot. The worker's plain import of worker.ts is
  // answered as a Node without type stripping would (Node 22.18 and later strip types, and would load it).
  const hooks = `export async function resolve(specifier, context, next) {
    if (specifier === 'tsx/esm/api') throw new Error('tsx is blocked in this thread');
    if (specifier === './worker.ts' && context.parentURL?.endsWith('/worker-entry.mjs')) {
      throw Object.assign(new TypeError('Unknown file extension ".ts" (as a Node without type stripping says)'), { code: 'ERR_UNKNOWN_FILE_EXTENSION' });
    }
    return next(specifier, context);
  }`;
  const blocker = `import { register } from 'node:module';\nregister(new URL('./hooks.mjs', import.meta.url));\n`;
  const account = privateKeyToAccount(generatePrivateKey());
  const job = asStrings(await signEip3009(account));
  const out = runChild(
    t,
    `const v = new SignatureVerifier({ threads: 2, maxBatch: 2 });
    const r = await Promise.all([v.verify(job), v.verify({ ...job, signature: '0x' }), v.verify(job), v.verify(job), v.verify(job)]);
    const { workerFailures, batches, lastWorkerError } = v.stats;
    await v.close();
    console.log(JSON.stringify({ r, workerFailures, batches, lastWorkerError: String(lastWorkerError) }));`,
    job,
    ['--import', '{dir}/blocker.mjs'],
    { 'hooks.mjs': hooks, 'blocker.mjs': blocker },
  ) as { r: unknown[]; workerFailures: number; batches: number; lastWorkerError: string };
  t.same(out.r, [account.address, null, account.address, account.address, account.address], 'every job answered as if a worker had');
  t.equal(out.workerFailures, out.batches, `all ${out.batches} batches verified in-process`);
  t.match(out.lastWorkerError, /could not load.*tsx is blocked in this thread/s);
});
