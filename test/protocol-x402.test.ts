import t from 'tap';
import { EXACT_PERMIT2_PROXY_ADDRESS, USDC_BASE_SEPOLIA_ADDRESS } from '../src/chain/canonical.ts';
import * as official from '@x402/core/http';
import { x402Client } from '@x402/core/client';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import {
  MAX_HEADER_BYTES,
  decodePaymentRequiredHeader,
  decodePaymentResponseHeader,
  decodePaymentSignatureHeader,
  encodePaymentRequiredHeader,
  encodePaymentResponseHeader,
  encodePaymentSignatureHeader,
  type CodecErrorCode,
  type PaymentPayload,
  type PaymentRequired,
  type PaymentRequirements,
  type Result,
  type SettleResponse,
} from '../src/protocol/x402/index.ts';
import { decodeFacilitatorRequest, decodeSettleResponse, decodeSupportedResponse, decodeVerifyResponse, encodeFacilitatorBody } from '../src/protocol/x402/facilitator-body.ts';
import { isPermit2Payload } from '../src/protocol/x402/types.ts';
import { requirementMatches, selectRequirement } from '../src/protocol/x402/select.ts';

const CODES: ReadonlySet<CodecErrorCode> = new Set<CodecErrorCode>(['too_large', 'not_base64', 'not_json', 'invalid_shape', 'unsupported_version', 'unsupported_scheme', 'unsupported_network']);

const USDC_BASE_SEPOLIA = USDC_BASE_SEPOLIA_ADDRESS;
const PAY_TO = '0x209693Bc6afc0C5328bA36FaF03C514EF312287C';
const TOKEN_B = '0x1111111111111111111111111111111111111111';
const PERMIT2_PROXY = EXACT_PERMIT2_PROXY_ADDRESS;

const eip3009Offer: PaymentRequirements = {
  scheme: 'exact',
  network: 'eip155:84532',
  amount: '10000',
  asset: USDC_BASE_SEPOLIA,
  payTo: PAY_TO,
  maxTimeoutSeconds: 60,
  extra: { name: 'USDC', version: '2' },
};
const permit2Offer: PaymentRequirements = {
  scheme: 'exact',
  network: 'eip155:4663',
  amount: '25000',
  asset: TOKEN_B,
  payTo: PAY_TO,
  maxTimeoutSeconds: 120,
  extra: { assetTransferMethod: 'permit2', spender: PERMIT2_PROXY },
};
const paymentRequired: PaymentRequired = {
  x402Version: 2,
  error: 'payment required',
  resource: { url: 'https://api.example.com/quote', description: 'A quote', mimeType: 'application/json' },
  accepts: [eip3009Offer, permit2Offer],
};
const eip3009Payload: PaymentPayload = {
  x402Version: 2,
  resource: paymentRequired.resource,
  accepted: eip3009Offer,
  payload: {
    signature: `0x${'ab'.repeat(65)}`,
    authorization: {
      from: '0x857b06519E91e3A54538791bDbb0E22373e36b66',
      to: PAY_TO,
      value: '10000',
      validAfter: '0',
      validBefore: '1900000000',
      nonce: `0x${'01'.repeat(32)}`,
    },
  },
};
const permit2Payload: PaymentPayload = {
  x402Version: 2,
  accepted: permit2Offer,
  payload: {
    signature: `0x${'cd'.repeat(65)}`,
    permit2Authorization: {
      from: '0x857b06519E91e3A54538791bDbb0E22373e36b66',
      permitted: { token: TOKEN_B, amount: '25000' },
      spender: PERMIT2_PROXY,
      nonce: (2n ** 255n + 7n).toString(),
      deadline: '1900000000',
      witness: { to: PAY_TO, validAfter: '0' },
    },
  },
  extensions: {},
};
const settled: SettleResponse = {
  success: true,
  transaction: `0x${'9f'.repeat(32)}`,
  network: 'eip155:84532',
  payer: '0x857b06519E91e3A54538791bDbb0E22373e36b66',
};

/** The two tap assertions the helper needs (structural, so it takes any subtest). */
type Asserts = Pick<typeof t, 'equal' | 'match'>;

function expectError<T>(t: Asserts, r: Result<T>, code: CodecErrorCode, pathPart?: string): void {
  t.equal(r.ok, false, `rejected with ${code}`);
  if (!r.ok) {
    t.equal(r.error.code, code, r.error.message);
    if (pathPart !== undefined) t.match(r.error.message, pathPart);
  }
}

const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');

t.test('headers round-trip through our codec', async (t) => {
  for (const [name, value, enc, dec] of [
    ['PAYMENT-REQUIRED', paymentRequired, encodePaymentRequiredHeader, decodePaymentRequiredHeader],
    ['PAYMENT-SIGNATURE (EIP-3009)', eip3009Payload, encodePaymentSignatureHeader, decodePaymentSignatureHeader],
    ['PAYMENT-SIGNATURE (Permit2)', permit2Payload, encodePaymentSignatureHeader, decodePaymentSignatureHeader],
    ['PAYMENT-RESPONSE', settled, encodePaymentResponseHeader, decodePaymentResponseHeader],
  ] as const) {
    const header = (enc as (v: unknown) => string)(value);
    t.match(header, /^[A-Za-z0-9+/]+={0,2}$/, `${name} is standard base64`);
    t.equal(header.length % 4, 0, `${name} is padded`);
    t.same((dec as (s: string) => Result<unknown>)(header), { ok: true, value }, `${name} decodes to the same value`);
  }
  const failed: SettleResponse = { success: false, transaction: '', network: 'eip155:8453', errorReason: 'invalid_exact_evm_signature', errorMessage: 'bad' };
  t.same(decodePaymentResponseHeader(encodePaymentResponseHeader(failed)), { ok: true, value: failed });
  const pending: SettleResponse = { success: false, transaction: `0x${'12'.repeat(32)}`, network: 'eip155:8453', errorReason: 'settlement_pending', status: 'pending', payer: settled.payer };
  t.same(decodePaymentResponseHeader(encodePaymentResponseHeader(pending)), { ok: true, value: pending });
  const p = decodePaymentSignatureHeader(encodePaymentSignatureHeader(permit2Payload));
  t.ok(p.ok && isPermit2Payload(p.value.payload), 'permit2 payload is discriminated');
});

t.test('interop with the official @x402/core/http helpers, both ways', async (t) => {
  for (const [value, ourEnc, ourDec, theirEnc, theirDec] of [
    [paymentRequired, encodePaymentRequiredHeader, decodePaymentRequiredHeader, official.encodePaymentRequiredHeader, official.decodePaymentRequiredHeader],
    [eip3009Payload, encodePaymentSignatureHeader, decodePaymentSignatureHeader, official.encodePaymentSignatureHeader, official.decodePaymentSignatureHeader],
    [permit2Payload, encodePaymentSignatureHeader, decodePaymentSignatureHeader, official.encodePaymentSignatureHeader, official.decodePaymentSignatureHeader],
    [settled, encodePaymentResponseHeader, decodePaymentResponseHeader, official.encodePaymentResponseHeader, official.decodePaymentResponseHeader],
  ] as const) {
    const theirs = (theirEnc as (v: unknown) => string)(value);
    const ours = (ourEnc as (v: unknown) => string)(value);
    t.equal(ours, theirs, 'byte-identical header values');
    t.same((ourDec as (s: string) => Result<unknown>)(theirs), { ok: true, value }, 'theirs decodes with ours');
    t.same((theirDec as (s: string) => unknown)(ours), value, 'ours decodes with theirs');
  }
  // Non-ASCII text survives both ways (UTF-8 inside base64).
  const unicode: PaymentRequired = { ...paymentRequired, resource: { url: 'https://api.example.com/€', description: 'café ☕ 😀' } };
  t.same(decodePaymentRequiredHeader(official.encodePaymentRequiredHeader(unicode as Parameters<typeof official.encodePaymentRequiredHeader>[0])), { ok: true, value: unicode });
  t.same(official.decodePaymentRequiredHeader(encodePaymentRequiredHeader(unicode)), unicode);
});

t.test('a payload signed by the official client (@x402/core client + @x402/evm exact) decodes and selects', async (t) => {
  const account = privateKeyToAccount(generatePrivateKey());
  const client = registerExactEvmScheme(x402Client.fromConfig({ schemes: [], spendControls: false }), { signer: account });
  // The client reads the requirements through the official header decoder, as @x402/fetch does.
  for (const offer of [eip3009Offer, permit2Offer]) {
    const pr = official.decodePaymentRequiredHeader(encodePaymentRequiredHeader({ ...paymentRequired, accepts: [offer] }));
    t.same(pr.accepts[0], offer, 'the official decoder reads our PAYMENT-REQUIRED');
    const payload = await client.createPaymentPayload(pr);
    const header = official.encodePaymentSignatureHeader(payload);
    const decoded = decodePaymentSignatureHeader(header);
    t.ok(decoded.ok, `official ${offer.extra?.assetTransferMethod ?? 'eip3009'} payload decodes: ${decoded.ok ? '' : decoded.error.message}`);
    if (!decoded.ok) continue;
    t.same(decoded.value, JSON.parse(JSON.stringify(payload)), 'decodes to exactly what the official client sent');
    t.same(decoded.value.resource, paymentRequired.resource, 'resource echoed');
    t.equal(selectRequirement(paymentRequired.accepts, decoded.value.accepted), offer, 'selects the matching offer (our object)');
    const inner = decoded.value.payload;
    if (isPermit2Payload(inner)) {
      t.equal(offer, permit2Offer);
      t.equal(inner.permit2Authorization.spender, PERMIT2_PROXY);
      t.equal(inner.permit2Authorization.permitted.amount, offer.amount);
      t.equal(inner.permit2Authorization.witness.validAfter, '0');
      t.equal(inner.permit2Authorization.from, account.address);
    } else {
      t.equal(offer, eip3009Offer);
      t.equal(inner.authorization.value, offer.amount);
      t.equal(inner.authorization.validAfter, '0');
      t.equal(inner.authorization.from, account.address);
      t.equal(inner.signature.length, 132, '65-byte signature');
    }
  }
});

t.test('base64 tolerance and rejection', async (t) => {
  const padded = [0, 1, 2].map((n) => ({ ...settled, errorMessage: 'x'.repeat(n) })).find((v) => encodePaymentResponseHeader(v).endsWith('='));
  if (!padded) throw new Error('no padded sample');
  const header = encodePaymentResponseHeader(padded);
  const unpadded = header.replace(/=+$/, '');
  t.not(unpadded, header, 'the sample has padding to strip');
  t.same(decodePaymentResponseHeader(unpadded), { ok: true, value: padded }, 'missing padding is tolerated');
  const url = Buffer.from(JSON.stringify({ ...settled, errorMessage: '>>>???' })).toString('base64url');
  t.match(url, /[-_]/, 'sample uses url-safe characters');
  t.ok(decodePaymentResponseHeader(url).ok, 'base64url is tolerated');
  for (const bad of ['', ' ', `${header} `, `${header.slice(0, 10)}\n${header.slice(10)}`, 'abc!', 'a', 'ab=c', 'abc==', '+-_/', '====']) {
    expectError(t, decodePaymentResponseHeader(bad), 'not_base64');
  }
  expectError(t, decodePaymentResponseHeader(b64('{"success":')), 'not_json');
  expectError(t, decodePaymentResponseHeader(Buffer.from([0xff, 0xfe, 0x7b, 0x7d]).toString('base64')), 'not_json', 'UTF-8');
  expectError(t, decodePaymentResponseHeader('A'.repeat(MAX_HEADER_BYTES + 1)), 'too_large');
  expectError(t, decodePaymentResponseHeader(b64('null')), 'invalid_shape');
  expectError(t, decodePaymentResponseHeader(b64('[]')), 'invalid_shape');
});

t.test('schema errors name the field and use the specific codes', async (t) => {
  const enc = (v: unknown): string => b64(JSON.stringify(v));
  const withAccepted = (patch: Record<string, unknown>): unknown => ({ ...eip3009Payload, accepted: { ...eip3009Offer, ...patch } });
  const withAuth = (patch: Record<string, unknown>): unknown => ({
    ...eip3009Payload,
    payload: { ...eip3009Payload.payload, authorization: { ...(eip3009Payload.payload as { authorization: object }).authorization, ...patch } },
  });
  expectError(t, decodePaymentSignatureHeader(enc({ ...eip3009Payload, x402Version: 1 })), 'unsupported_version');
  expectError(t, decodePaymentSignatureHeader(enc({ x402Version: 1, scheme: 'exact', network: 'base', payload: {} })), 'unsupported_version');
  expectError(t, decodePaymentSignatureHeader(enc({ ...eip3009Payload, x402Version: '2' })), 'unsupported_version');
  expectError(t, decodePaymentSignatureHeader(enc({ accepted: eip3009Offer })), 'invalid_shape', '/x402Version');
  expectError(t, decodePaymentSignatureHeader(enc(withAccepted({ scheme: 'upto' }))), 'unsupported_scheme', '/accepted/scheme');
  expectError(t, decodePaymentSignatureHeader(enc(withAccepted({ network: 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp' }))), 'unsupported_network', '/accepted/network');
  expectError(t, decodePaymentSignatureHeader(enc(withAccepted({ network: 'eip155:08453' }))), 'unsupported_network');
  expectError(t, decodePaymentSignatureHeader(enc(withAccepted({ amount: (2n ** 256n).toString() }))), 'invalid_shape', '/accepted/amount');
  t.ok(decodePaymentSignatureHeader(enc(withAccepted({ amount: (2n ** 256n - 1n).toString() }))).ok, '2^256-1 is a uint256');
  for (const amount of ['-1', '01', '1e6', '0x10', ' 1', '1.5', '', 1000]) {
    expectError(t, decodePaymentSignatureHeader(enc(withAccepted({ amount }))), 'invalid_shape', '/accepted/amount');
  }
  expectError(t, decodePaymentSignatureHeader(enc(withAccepted({ payTo: '0x1234' }))), 'invalid_shape', '/accepted/payTo');
  expectError(t, decodePaymentSignatureHeader(enc(withAccepted({ extra: undefined }))), 'invalid_shape', '/accepted/extra');
  expectError(t, decodePaymentSignatureHeader(enc(withAccepted({ extra: null }))), 'invalid_shape', '/accepted/extra');
  expectError(t, decodePaymentSignatureHeader(enc(withAccepted({ maxTimeoutSeconds: 0 }))), 'invalid_shape', '/accepted/maxTimeoutSeconds');
  expectError(t, decodePaymentSignatureHeader(enc(withAccepted({ maxTimeoutSeconds: 1.5 }))), 'invalid_shape', '/accepted/maxTimeoutSeconds');
  expectError(t, decodePaymentSignatureHeader(enc(withAuth({ validBefore: (2n ** 256n).toString() }))), 'invalid_shape', '/payload/authorization/validBefore');
  expectError(t, decodePaymentSignatureHeader(enc(withAuth({ nonce: '0x01' }))), 'invalid_shape', '/payload/authorization/nonce');
  expectError(t, decodePaymentSignatureHeader(enc(withAuth({ extraField: 1 }))), 'invalid_shape', '/payload/authorization/extraField');
  expectError(t, decodePaymentSignatureHeader(enc({ ...eip3009Payload, payload: { ...eip3009Payload.payload, signature: '0xabc' } })), 'invalid_shape', '/payload/signature');
  expectError(t, decodePaymentSignatureHeader(enc({ ...eip3009Payload, payload: { ...eip3009Payload.payload, signature: `0x${'ab'.repeat(5000)}` } })), 'invalid_shape', '/payload/signature');
  // Both shapes at once, or neither: refused.
  expectError(t, decodePaymentSignatureHeader(enc({ ...eip3009Payload, payload: { ...eip3009Payload.payload, ...permit2Payload.payload } })), 'invalid_shape', '/payload/authorization');
  expectError(t, decodePaymentSignatureHeader(enc({ ...eip3009Payload, payload: { signature: '0x00' } })), 'invalid_shape', '/payload/authorization');
  // Tolerance: unknown top-level keys, resource extras, extra extras.
  const tolerant = {
    ...eip3009Payload,
    somethingNew: { a: 1 },
    resource: { url: 'https://x', serviceName: 'svc', tags: ['a'], future: true },
    accepted: { ...eip3009Offer, extra: { ...eip3009Offer.extra, clientAdded: 1 } },
    extensions: { bazaar: { info: {} } },
  };
  t.same(decodePaymentSignatureHeader(enc(tolerant)), { ok: true, value: tolerant });
  // PaymentRequired needs at least one offer.
  expectError(t, decodePaymentRequiredHeader(enc({ ...paymentRequired, accepts: [] })), 'invalid_shape', '/accepts');
  expectError(t, decodePaymentRequiredHeader(enc({ ...paymentRequired, resource: { url: '' } })), 'invalid_shape', '/resource/url');
  expectError(t, decodePaymentResponseHeader(enc({ ...settled, transaction: '0x12' })), 'invalid_shape', '/transaction');
  expectError(t, decodePaymentResponseHeader(enc({ ...settled, status: 'done' })), 'invalid_shape', '/status');
});

t.test('facilitator bodies', async (t) => {
  const request = { x402Version: 2 as const, paymentPayload: eip3009Payload, paymentRequirements: eip3009Offer };
  const text = encodeFacilitatorBody(request);
  t.same(decodeFacilitatorRequest(text), { ok: true, value: request }, 'string body');
  t.same(decodeFacilitatorRequest(new TextEncoder().encode(text)), { ok: true, value: request }, 'byte body');
  t.same(decodeFacilitatorRequest(Buffer.from(text)), { ok: true, value: request }, 'Buffer body');
  expectError(t, decodeFacilitatorRequest(text, 100), 'too_large');
  expectError(t, decodeFacilitatorRequest('x'.repeat(70 * 1024)), 'too_large');
  expectError(t, decodeFacilitatorRequest('é'.repeat(40 * 1024)), 'too_large', 'bytes');
  expectError(t, decodeFacilitatorRequest(`\ufeff${text}`), 'not_json');
  expectError(t, decodeFacilitatorRequest(new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode(text)])), 'not_json');
  expectError(t, decodeFacilitatorRequest(new Uint8Array([0xc3, 0x28])), 'not_json', 'UTF-8');
  expectError(t, decodeFacilitatorRequest(''), 'not_json');
  expectError(t, decodeFacilitatorRequest('{"x402Version":1}'), 'unsupported_version');
  expectError(t, decodeFacilitatorRequest(JSON.stringify({ ...request, paymentPayload: { ...eip3009Payload, x402Version: 1 } })), 'unsupported_version', '/paymentPayload/x402Version');
  expectError(t, decodeFacilitatorRequest(JSON.stringify({ ...request, paymentRequirements: undefined })), 'invalid_shape', '/paymentRequirements');
  expectError(t, decodeFacilitatorRequest(JSON.stringify({ ...request, paymentRequirements: { ...eip3009Offer, scheme: 'upto' } })), 'unsupported_scheme');
  expectError(t, decodeFacilitatorRequest('['.repeat(60000)), 'not_json');
  // An address is all one case or its EIP-55 checksum: a mistyped checksum is not read as some address.
  const withFrom = (from: string) =>
    JSON.stringify({
      ...request,
      paymentPayload: { ...eip3009Payload, payload: { ...eip3009Payload.payload, authorization: { ...(eip3009Payload.payload as { authorization: object }).authorization, from } } },
    });
  expectError(t, decodeFacilitatorRequest(withFrom('0x857b06519E91e3A54538791bDbb0E22373e36B66')), 'invalid_shape', '/paymentPayload/payload/authorization/from');
  t.equal(decodeFacilitatorRequest(withFrom('0x857b06519e91e3a54538791bdbb0e22373e36b66')).ok, true, 'all lower case');
  t.equal(decodeFacilitatorRequest(withFrom('0x857B06519E91E3A54538791BDBB0E22373E36B66')).ok, true, 'all upper case');

  t.same(decodeVerifyResponse('{"isValid":true,"payer":"0x857b06519E91e3A54538791bDbb0E22373e36b66"}').ok, true);
  t.same(decodeVerifyResponse('{"isValid":false,"invalidReason":"invalid_exact_evm_signature"}').ok, true);
  expectError(t, decodeVerifyResponse('{"isValid":"no"}'), 'invalid_shape', '/isValid');
  t.same(decodeSettleResponse(JSON.stringify(settled)), { ok: true, value: settled });
  const supported = { kinds: [{ x402Version: 2, scheme: 'exact', network: 'eip155:84532' }], extensions: [], signers: { 'eip155:*': [PAY_TO] } };
  t.same(decodeSupportedResponse(JSON.stringify(supported)), { ok: true, value: supported });
  expectError(t, decodeSupportedResponse('{"kinds":[],"extensions":[],"signers":{"eip155:*":"0x"}}'), 'invalid_shape', '/signers/eip155:*');
});

t.test('selectRequirement', async (t) => {
  const offers = [eip3009Offer, permit2Offer];
  t.equal(selectRequirement(offers, structuredClone(eip3009Offer)), eip3009Offer, 'exact echo');
  t.equal(selectRequirement(offers, structuredClone(permit2Offer)), permit2Offer);
  t.equal(
    selectRequirement(offers, { ...eip3009Offer, payTo: PAY_TO.toLowerCase() as `0x${string}`, asset: USDC_BASE_SEPOLIA.toUpperCase().replace('0X', '0x') as `0x${string}` }),
    eip3009Offer,
    'addresses compare case-insensitively',
  );
  t.equal(selectRequirement(offers, { ...permit2Offer, extra: { ...permit2Offer.extra, spender: PERMIT2_PROXY.toLowerCase() } }), permit2Offer, 'addresses inside extra too');
  t.equal(selectRequirement(offers, { ...eip3009Offer, extra: { ...eip3009Offer.extra, added: 'by client' } }), eip3009Offer, 'client may add extra keys');
  t.equal(selectRequirement(offers, { ...eip3009Offer, ...{ unknownTopLevel: 1 } } as PaymentRequirements), eip3009Offer, 'unknown top-level key ignored');
  const changes: Array<Partial<PaymentRequirements>> = [
    { amount: '9999' },
    { amount: '10000 ' },
    { network: 'eip155:8453' },
    { payTo: TOKEN_B },
    { asset: TOKEN_B },
    { maxTimeoutSeconds: 61 },
    { extra: { name: 'USD Coin', version: '2' } },
    { extra: { name: 'USDC' } },
    { extra: { name: 'USDC', version: 2 } },
  ];
  for (const change of changes) t.equal(selectRequirement(offers, { ...eip3009Offer, ...change }), undefined, `no match after ${JSON.stringify(change)}`);
  const { extra: _dropped, ...noExtra } = eip3009Offer;
  t.equal(selectRequirement(offers, noExtra as PaymentRequirements), undefined, 'dropping declared extra fails');
  t.equal(selectRequirement(offers, { ...eip3009Offer, extra: {} }), undefined, 'emptying declared extra fails');
  t.ok(requirementMatches({ ...eip3009Offer, extra: {} }, eip3009Offer), 'an offer with an empty extra accepts any extra');
  t.equal(selectRequirement([], eip3009Offer), undefined);
});

// ---------------------------------------------------------------------------------------------
// Fuzz: hostile inputs must never throw and must give a typed error (or a value that passed the schema).

function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let x = s;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

t.test('fuzz: decoders never throw and always return a typed result', async (t) => {
  const rnd = prng(402);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
  const hostile: unknown[] = [
    (2n ** 256n).toString(),
    (2n ** 256n - 1n).toString(),
    '9'.repeat(78),
    '9'.repeat(300),
    '-1',
    -1,
    // biome-ignore lint/correctness/noPrecisionLoss: an overflowing literal (Infinity) on purpose, to see it refused
    1e400 as number,
    0.5,
    Number.MAX_SAFE_INTEGER + 2,
    null,
    true,
    [],
    {},
    '',
    'upto',
    'eip155:',
    'solana:mainnet',
    'eip155:1234567890123',
    '0x',
    `0x${'g'.repeat(40)}`,
    'x'.repeat(5000),
    { __proto__: { polluted: true } },
    JSON.parse('{"__proto__":{"x":1}}') as unknown,
    '\u0000',
    '\ud800',
  ];
  const samples: unknown[] = [paymentRequired, eip3009Payload, permit2Payload, settled, { x402Version: 2, paymentPayload: eip3009Payload, paymentRequirements: eip3009Offer }];

  function paths(v: unknown, prefix: Array<string | number> = []): Array<Array<string | number>> {
    const out: Array<Array<string | number>> = [prefix];
    if (v && typeof v === 'object') {
      for (const [k, c] of Object.entries(v)) out.push(...paths(c, [...prefix, Array.isArray(v) ? Number(k) : k]));
    }
    return out;
  }
  function mutate(sample: unknown): unknown {
    const copy = structuredClone(sample);
    const all = paths(copy);
    const path = pick(all);
    if (path.length === 0) return pick(hostile);
    let node = copy as Record<string | number, unknown>;
    for (const k of path.slice(0, -1)) node = node[k] as Record<string | number, unknown>;
    const last = path[path.length - 1] as string | number;
    const r = rnd();
    if (r < 0.15) delete node[last];
    else if (r < 0.25) node[`unknown${Math.floor(rnd() * 10)}`] = pick(hostile);
    else node[last] = pick(hostile);
    return copy;
  }
  function randomBytes(n: number): Uint8Array {
    const b = new Uint8Array(n);
    for (let i = 0; i < n; i++) b[i] = Math.floor(rnd() * 256);
    return b;
  }
  function randomString(n: number): string {
    const alphabet = 'ABCxyz019+/=-_ !"{}[]:,\\\n\t\u00e9\u20ac\ud83d\ude00';
    let s = '';
    for (let i = 0; i < n; i++) s += alphabet[Math.floor(rnd() * alphabet.length)];
    return s;
  }

  const headerDecoders = [decodePaymentRequiredHeader, decodePaymentSignatureHeader, decodePaymentResponseHeader] as const;
  const bodyDecoders = [decodeFacilitatorRequest, decodeVerifyResponse, decodeSettleResponse, decodeSupportedResponse] as const;
  let thrown = 0;
  let untyped = 0;
  let accepted = 0;
  let total = 0;
  const check = (fn: () => Result<unknown>): void => {
    total++;
    let r: Result<unknown>;
    try {
      r = fn();
    } catch {
      thrown++;
      return;
    }
    if (r.ok) accepted++;
    else if (!CODES.has(r.error.code) || typeof r.error.message !== 'string' || r.error.message.length === 0) untyped++;
  };

  for (let i = 0; i < 3000; i++) {
    const kind = i % 6;
    let json: string;
    let raw: string | Uint8Array;
    if (kind === 0) {
      raw = randomBytes(Math.floor(rnd() * 200));
      json = Buffer.from(raw).toString('latin1');
    } else if (kind === 1) {
      json = randomString(Math.floor(rnd() * 120));
      raw = json;
    } else if (kind === 2) {
      const full = JSON.stringify(pick(samples));
      json = full.slice(0, Math.floor(rnd() * full.length));
      raw = json;
    } else {
      json = JSON.stringify(mutate(pick(samples))) ?? 'undefined';
      raw = json;
    }
    const asB64 = Buffer.from(typeof raw === 'string' ? raw : Buffer.from(raw)).toString('base64');
    for (const d of headerDecoders) {
      check(() => d(asB64));
      check(() => d(json));
      if (kind === 1) check(() => d(json.replace(/[^A-Za-z0-9+/=]/g, '')));
    }
    for (const d of bodyDecoders) check(() => d(raw));
  }
  const huge = 'A'.repeat(100 * 1024);
  for (const d of headerDecoders) {
    check(() => d(huge));
    const r = d(huge);
    t.equal(r.ok ? 'ok' : r.error.code, 'too_large', 'a 100 KiB header is too_large');
  }
  for (const d of bodyDecoders) {
    const r = d(`{"a":"${'x'.repeat(100 * 1024)}"}`);
    t.equal(r.ok ? 'ok' : r.error.code, 'too_large', 'a 100 KiB body is too_large');
  }
  // Non-string input from untyped callers.
  for (const d of headerDecoders) for (const v of [undefined, null, 42, {}]) check(() => d(v as unknown as string));
  for (const d of bodyDecoders) for (const v of [undefined, null, 42, {}]) check(() => d(v as unknown as string));

  t.equal(thrown, 0, `no decoder threw (${total} calls)`);
  t.equal(untyped, 0, 'every rejection carries a documented code and a message');
  t.ok(accepted > 0 && accepted < total, `some mutations stay valid (${accepted}), most are refused`);
});
