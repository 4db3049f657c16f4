import t from 'tap';
import { fillHeader, headerTemplate } from '../src/http/header-template.ts';
import { transferWithAuthorizationTypes } from './helpers/eip3009.ts';
import { USDC_BASE_SEPOLIA_ADDRESS } from '../src/chain/canonical.ts';
import { BodyDigest, Challenge, Credential, Errors, PaymentRequest, Receipt } from 'mppx';
import { challengeHash } from 'mppx/evm';
import { charge as mppxEvmCharge } from 'mppx/evm/client';
import { recoverTypedDataAddress, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { MAX_HEADER_BYTES, encodeBase64Url, utf8, type CodecErrorCode, type Result } from '../src/protocol/x402/codec.ts';
import { canonicalJson } from '../src/protocol/mpp/canonical-json.ts';
import { challengeId, chargeRequest, createChallenge, decodeRequest, encodeRequest, formatRfc3339, verifyChallenge } from '../src/protocol/mpp/challenge.ts';
import { challengeTemplate, issueFromTemplate, saltedHeaderParts, templateMac } from '../src/protocol/mpp/challenge-template.ts';
import { formatWwwAuthenticate, parseWwwAuthenticate } from '../src/protocol/mpp/www-authenticate.ts';
import { ROUTE_TAG_CHARS, SALT_CHARS, bodyDigest, bodyMismatch, boundMethod, opaqueFor, opaqueIsFor, routeTag, saltSource } from '../src/protocol/mpp/binding.ts';
import { expectedAuthorizationNonce, formatAuthorizationPayment, parseAuthorizationPayment, sourceMatches } from '../src/protocol/mpp/credential.ts';
import { decodeReceipt, encodeReceipt, receiptSigningMessage, signReceipt, verifyReceipt } from '../src/protocol/mpp/receipt.ts';
import { PROBLEM_CODES, problemJson } from '../src/protocol/mpp/problems.ts';
import type { AuthorizationPayload, PaymentChallenge, PaymentCredential, PaymentReceipt } from '../src/protocol/mpp/types.ts';

const SECRET = 'gate402-test-secret';
const KEY = utf8(SECRET);
const USDC = USDC_BASE_SEPOLIA_ADDRESS;
const RECIPIENT = '0x209693Bc6afc0C5328bA36FaF03C514EF312287C';
const REALM = 'api.example.com';
const request = chargeRequest({ amount: 10_000n, currency: USDC, recipient: RECIPIENT, chainId: 84532 });

function fresh(opts: Partial<{ expires: Date; description: string; digest: string; opaque: string; realm: string }> = {}): PaymentChallenge {
  const r = createChallenge(KEY, { realm: opts.realm ?? REALM, request, expires: opts.expires ?? new Date(Date.now() + 300_000), ...opts });
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

/** The code of a rejection, or 'ok'. */
function code<T>(r: Result<T>): CodecErrorCode | 'ok' {
  return r.ok ? 'ok' : r.error.code;
}
function message<T>(r: Result<T>): string {
  return r.ok ? '' : r.error.message;
}

t.test('canonical JSON (RFC 8785) matches the vectors and mppx/ox on random values', async (t) => {
  t.same(canonicalJson({ b: 2, a: 1, c: [true, false, null, { z: 'x', y: -0 }] }), { ok: true, value: '{"a":1,"b":2,"c":[true,false,null,{"y":0,"z":"x"}]}' });
  // RFC 8785 section 3.2.3 key ordering by UTF-16 code units.
  const keys = {
    '\u20ac': 'Euro Sign',
    '\r': 'Carriage Return',
    '\ufb33': 'Hebrew Letter Dalet With Dagesh',
    '1': 'One',
    '\ud83d\ude00': 'Emoji: Grinning Face',
    '\u0080': 'Control',
    '\u00f6': 'Latin Small Letter O With Diaeresis',
  };
  const sorted = canonicalJson(keys);
  t.ok(sorted.ok);
  // (read the keys with a regex: Object.keys would list the integer-like "1" first)
  if (sorted.ok)
    t.same(
      [...sorted.value.matchAll(/"((?:[^"\\]|\\.)*)":/g)].map((m) => JSON.parse(`"${m[1]}"`) as string),
      ['\r', '1', '\u0080', '\u00f6', '\u20ac', '\ud83d\ude00', '\ufb33'],
    );
  // Number and string serialization (RFC 8785 appendix B samples).
  t.same(canonicalJson([1e30, 4.5, 0.002, 1e-7, 333333333.3333333, 1e21, 1e20, -5e-324, 9007199254740991]), {
    ok: true,
    value: '[1e+30,4.5,0.002,1e-7,333333333.3333333,1e+21,100000000000000000000,-5e-324,9007199254740991]',
  });
  t.same(canonicalJson('\u20ac$\u000f\nA\'B"\\\\"/\u007f\u2028'), { ok: true, value: '"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/\u007f\u2028"' });
  for (const bad of [Number.NaN, Infinity, 1n, () => 1, Symbol('s'), undefined, new Date(0), '\ud800', { '\udc00': 1 }]) {
    t.equal(code(canonicalJson(bad)), 'invalid_value', `refuses ${String(typeof bad)}`);
  }
  let deep: unknown = 1;
  for (let i = 0; i < 100; i++) deep = [deep];
  t.equal(code(canonicalJson(deep)), 'invalid_value', 'refuses absurd nesting');
  t.same(canonicalJson({ a: undefined, b: [undefined] }), { ok: true, value: '{"b":[null]}' });

  // Random values against the independent implementation in mppx (PaymentRequest.serialize = base64url(ox canonicalize)).
  let seed = 8785;
  const rnd = (): number => {
    seed = (seed * 1103515245 + 12345) >>> 0;
    return seed / 4294967296;
  };
  const chars = ['a', 'Z', '0', '9', '_', '-', '"', '\\', '\n', '\t', '\u0001', '\u007f', '\u00e9', '\u20ac', '\ud83d\ude00', ' ', '1', '10'];
  const str = (): string => Array.from({ length: Math.floor(rnd() * 6) }, () => chars[Math.floor(rnd() * chars.length)]).join('');
  const num = (): number => [rnd() * 1e6, -rnd(), Math.floor(rnd() * 1e15), rnd() * 1e-9, 1e25 * rnd(), 0][Math.floor(rnd() * 6)] as number;
  const value = (depth: number): unknown => {
    const k = Math.floor(rnd() * (depth > 3 ? 4 : 6));
    if (k === 0) return str();
    if (k === 1) return num();
    if (k === 2) return rnd() < 0.5;
    if (k === 3) return null;
    if (k === 4) return Array.from({ length: Math.floor(rnd() * 4) }, () => value(depth + 1));
    return Object.fromEntries(Array.from({ length: Math.floor(rnd() * 5) }, () => [str(), value(depth + 1)]));
  };
  let same = 0;
  for (let i = 0; i < 500; i++) {
    const v = { root: value(0) };
    const ours = canonicalJson(v);
    if (ours.ok && encodeBase64Url(utf8(ours.value)) === PaymentRequest.serialize(v as Record<string, unknown>)) same++;
  }
  t.equal(same, 500, 'identical to mppx for 500 random documents');
});

t.test('canonical JSON: the examples published in RFC 8785', async (t) => {
  // Section 3.2.2: the sample input (its numbers spelled as the RFC spells them) and its canonical form.
  const input = JSON.parse(
    '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/", "literals": [null, true, false]}',
  ) as unknown;
  t.same(canonicalJson(input), { ok: true, value: '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}' });
  // Section 3.2.3: members sorted by the UTF-16 code units of their names.
  const sorting = JSON.parse(
    '{"\\u20ac": "Euro Sign", "\\r": "Carriage Return", "\\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One", "\\ud83d\\ude00": "Emoji: Grinning Face", "\\u0080": "Control", "\\u00f6": "Latin Small Letter O With Diaeresis"}',
  ) as unknown;
  t.same(canonicalJson(sorting), {
    ok: true,
    value:
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
  });
  // Appendix B: IEEE 754 doubles (as hex) and their canonical text; NaN and Infinity are errors.
  const numbers: Array<[string, string | undefined]> = [
    ['0000000000000000', '0'],
    ['8000000000000000', '0'],
    ['0000000000000001', '5e-324'],
    ['8000000000000001', '-5e-324'],
    ['7fefffffffffffff', '1.7976931348623157e+308'],
    ['ffefffffffffffff', '-1.7976931348623157e+308'],
    ['4340000000000000', '9007199254740992'],
    ['c340000000000000', '-9007199254740992'],
    ['4430000000000000', '295147905179352830000'],
    ['7fffffffffffffff', undefined],
    ['7ff0000000000000', undefined],
    ['44b52d02c7e14af5', '9.999999999999997e+22'],
    ['44b52d02c7e14af6', '1e+23'],
    ['44b52d02c7e14af7', '1.0000000000000001e+23'],
    ['444b1ae4d6e2ef4e', '999999999999999700000'],
    ['444b1ae4d6e2ef4f', '999999999999999900000'],
    ['444b1ae4d6e2ef50', '1e+21'],
    ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'],
    ['3eb0c6f7a0b5ed8d', '0.000001'],
    ['41b3de4355555553', '333333333.3333332'],
    ['41b3de4355555554', '333333333.33333325'],
    ['41b3de4355555555', '333333333.3333333'],
    ['41b3de4355555556', '333333333.3333334'],
    ['41b3de4355555557', '333333333.33333343'],
    ['becbf647612f3696', '-0.0000033333333333333333'],
    ['43143ff3c1cb0959', '1424953923781206.2'],
  ];
  for (const [hex, text] of numbers) {
    const n = Buffer.from(hex, 'hex').readDoubleBE(0);
    if (text === undefined) t.equal(code(canonicalJson([n])), 'invalid_value', `${hex} (${n}) is refused`);
    else t.same(canonicalJson([n]), { ok: true, value: `[${text}]` }, `${hex} is ${text}`);
  }
});

t.test('request encoding', async (t) => {
  const encoded = encodeRequest(request);
  t.ok(encoded.ok);
  if (!encoded.ok) return;
  t.equal(
    Buffer.from(encoded.value, 'base64url').toString('utf8'),
    `{"amount":"10000","currency":"${USDC}","methodDetails":{"chainId":84532,"credentialTypes":["authorization"],"decimals":6},"recipient":"${RECIPIENT}"}`,
  );
  t.match(encoded.value, /^[A-Za-z0-9_-]+$/, 'base64url without padding');
  t.equal(encoded.value, PaymentRequest.serialize(request), 'same bytes as mppx');
  t.same(decodeRequest(encoded.value), { ok: true, value: request });
  t.same(PaymentRequest.deserialize(encoded.value), request, 'mppx decodes ours');
  t.equal(code(encodeRequest({ ...request, amount: '-1' })), 'invalid_value');
  t.equal(code(encodeRequest({ ...request, methodDetails: { ...request.methodDetails, credentialTypes: ['transaction'] } })), 'invalid_value');
  t.equal(code(encodeRequest({ ...request, methodDetails: { ...request.methodDetails, chainId: Number.NaN } })), 'invalid_value');
  t.equal(code(decodeRequest('!!!')), 'not_base64');
  t.equal(code(decodeRequest(encodeBase64Url(utf8('{"amount":1}')))), 'invalid_shape');
  t.match(message(decodeRequest(encodeBase64Url(utf8(JSON.stringify({ ...request, amount: (2n ** 256n).toString() }))))), '/amount');
  t.match(message(decodeRequest(encodeBase64Url(utf8(JSON.stringify({ ...request, methodDetails: { chainId: 1, decimals: 6, credentialTypes: [] } }))))), '/methodDetails/credentialTypes');
});

t.test('challenge id equals the mppx HMAC binding, with and without optional slots', async (t) => {
  for (const opts of [{}, { digest: 'sha-256=abc' }, { opaque: 'eyJyZWYiOiIxIn0' }, { digest: 'sha-256=x', opaque: 'op', description: 'not bound' }]) {
    const ours = fresh(opts);
    const theirs = Challenge.from({
      secretKey: SECRET,
      realm: ours.realm,
      method: 'evm',
      intent: 'charge',
      request: PaymentRequest.deserialize(ours.request),
      expires: ours.expires,
      ...opts,
    });
    t.equal(ours.id, theirs.id, `same id for ${JSON.stringify(opts)}`);
    t.match(ours.id, /^[A-Za-z0-9_-]{43}$/, '32-byte HMAC, base64url without padding');
  }
  const c = fresh();
  t.equal(challengeId(KEY, c), c.id);
  t.not(challengeId(utf8('other key'), c), c.id);
  t.not(challengeId(KEY, { ...c, realm: 'other' }), c.id);
  t.not(challengeId(KEY, { ...c, digest: '' }), challengeId(KEY, { ...c, opaque: 'x' }));
  t.match(c.expires, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/, 'RFC 3339, whole seconds, UTC');
  t.equal(formatRfc3339(new Date(Number.NaN)), undefined);
  t.equal(code(createChallenge(KEY, { realm: REALM, request, expires: new Date(Number.NaN) })), 'invalid_value');
});

t.test('WWW-Authenticate: ours parses with mppx, mppx parses with ours', async (t) => {
  const c = fresh({ description: 'Caf\u00e9 \u2014 "quoted" \\ back\nslash \ud83d\ude00', opaque: 'b3BhcXVl' });
  const header = formatWwwAuthenticate(c);
  t.match(header, /^Payment id="[^"]+", realm="api\.example\.com", method="evm", intent="charge", request="[A-Za-z0-9_-]+", expires="[^"]+", description="/);
  t.match(header, /^[\x20-\x7e]+$/, 'pure printable ASCII');
  const theirs = Challenge.deserializeList(`Bearer realm="x", ${header}`);
  t.equal(theirs.length, 1);
  const parsedByMppx = theirs[0];
  if (!parsedByMppx) return;
  t.equal(parsedByMppx.id, c.id);
  t.equal(parsedByMppx.description, c.description, 'mppx unescapes our description');
  t.equal(parsedByMppx.opaque, c.opaque);
  t.same(parsedByMppx.request, request);
  t.ok(Challenge.verify(parsedByMppx, { secretKey: SECRET }), 'mppx verifies our HMAC');
  t.same(parseWwwAuthenticate(header), { ok: true, value: [c] }, 'round trip');

  const fromMppx = Challenge.from({ secretKey: SECRET, realm: REALM, method: 'evm', intent: 'charge', request, expires: c.expires, description: 'caf\u00e9 \u2014 "x"', digest: 'sha-256=abc' });
  const parsed = parseWwwAuthenticate(Challenge.serialize(fromMppx));
  t.ok(parsed.ok, message(parsed));
  if (parsed.ok) {
    const p = parsed.value[0];
    t.equal(p?.id, fromMppx.id);
    t.equal(p?.description, fromMppx.description, "we unescape mppx's \\uXXXX");
    t.equal(p?.digest, 'sha-256=abc');
    t.same(verifyChallenge(KEY, p as PaymentChallenge, Date.now()), { ok: true }, 'we verify an mppx-made challenge');
  }

  // Several challenges in one value, mixed with other schemes and odd spacing.
  const c2 = fresh({ realm: 'second' });
  const many = parseWwwAuthenticate(`Basic realm="r", ${header} ,Bearer abc123==, payment   ${formatWwwAuthenticate(c2).slice('Payment '.length)}, Negotiate`);
  t.ok(many.ok, message(many));
  if (many.ok)
    t.same(
      many.value.map((x) => x.realm),
      [REALM, 'second'],
    );
  // Token (unquoted) values and case-insensitive names.
  const tokenForm = parseWwwAuthenticate(`Payment ID=${c.id}, Realm=host, METHOD=evm, intent=charge, request=${c.request}, expires="${c.expires}"`);
  t.ok(tokenForm.ok, message(tokenForm));
});

t.test('WWW-Authenticate rejections', async (t) => {
  const c = fresh();
  const header = formatWwwAuthenticate(c);
  t.equal(code(parseWwwAuthenticate(`${header}, id="again"`)), 'duplicate_parameter');
  t.match(message(parseWwwAuthenticate(`${header}, ID="again"`)), 'id');
  t.equal(code(parseWwwAuthenticate(header.replace(/, expires="[^"]*"/, ''))), 'missing_parameter');
  t.match(message(parseWwwAuthenticate(header.replace(/, expires="[^"]*"/, ''))), 'expires');
  t.equal(code(parseWwwAuthenticate(header.replace(/request="[^"]*", /, ''))), 'missing_parameter');
  t.equal(code(parseWwwAuthenticate(header.replace(/expires="[^"]*"/, 'expires="tomorrow"'))), 'invalid_parameter');
  t.equal(code(parseWwwAuthenticate(header.replace('method="evm"', 'method="EVM"'))), 'invalid_parameter');
  t.equal(code(parseWwwAuthenticate(header.replace(/request="[^"]*"/, 'request="a+b/c="'))), 'invalid_parameter');
  t.equal(code(parseWwwAuthenticate('Bearer realm="x"')), 'missing_scheme');
  t.equal(code(parseWwwAuthenticate('')), 'missing_scheme');
  t.equal(code(parseWwwAuthenticate('Payment abcdef==')), 'invalid_syntax');
  t.equal(code(parseWwwAuthenticate(`${header.slice(0, -1)}`)), 'invalid_syntax', 'unterminated quoted-string');
  t.equal(code(parseWwwAuthenticate(`${header} trailing`)), 'invalid_syntax');
  t.equal(code(parseWwwAuthenticate(header.replace('realm="api', 'realm="a\r\npi'))), 'invalid_syntax');
  t.equal(code(parseWwwAuthenticate('="x"')), 'invalid_syntax');
  t.equal(code(parseWwwAuthenticate('id="x"')), 'invalid_syntax', 'a parameter before any scheme');
  t.equal(code(parseWwwAuthenticate('Basic, Bearer')), 'missing_scheme');
  t.equal(code(parseWwwAuthenticate(`Payment ${'x'.repeat(MAX_HEADER_BYTES)}`)), 'too_large');
  const proto = parseWwwAuthenticate(`${header}, __proto__="p", constructor="c"`);
  t.ok(proto.ok, 'odd parameter names are harmless');
});

t.test('verifyChallenge', async (t) => {
  const now = Date.now();
  const c = fresh({ expires: new Date(now + 60_000) });
  t.same(verifyChallenge(KEY, c, now), { ok: true });
  t.same(verifyChallenge(KEY, c, new Date(now)), { ok: true }, 'Date accepted');
  t.match(verifyChallenge(KEY, c, now + 61_000), { ok: false, error: { code: 'payment-expired' } });
  t.match(verifyChallenge(KEY, { ...c, request: fresh({ realm: 'x' }).request.replace(/.$/, 'A') }, now), { ok: false, error: { code: 'invalid-challenge' } });
  t.match(verifyChallenge(KEY, { ...c, id: c.id.slice(1) }, now), { ok: false, error: { code: 'invalid-challenge' } });
  t.match(verifyChallenge(KEY, { ...c, id: `${c.id.slice(0, -1)}${c.id.endsWith('A') ? 'B' : 'A'}` }, now), { ok: false, error: { code: 'invalid-challenge' } });
  t.match(verifyChallenge(utf8('wrong'), c, now), { ok: false, error: { code: 'invalid-challenge' } });
  t.match(verifyChallenge(KEY, { ...c, expires: '2999-01-01T00:00:00Z' }, now), { ok: false, error: { code: 'invalid-challenge' } }, 'extending expires breaks the HMAC');
  const old = fresh({ expires: new Date(now - 1000) });
  t.match(verifyChallenge(KEY, old, now), { ok: false, error: { code: 'payment-expired' } });
  t.match(verifyChallenge(KEY, { ...old, realm: 'forged' }, now), { ok: false, error: { code: 'invalid-challenge' } }, 'forged beats expired');
  t.match(verifyChallenge(KEY, { ...c, opaque: 'added' }, now), { ok: false, error: { code: 'invalid-challenge' } });
});

t.test('credential created by the mppx evm client parses with ours', async (t) => {
  const account = privateKeyToAccount(generatePrivateKey());
  const c = fresh();
  const [challenge] = Challenge.deserializeList(formatWwwAuthenticate(c));
  if (!challenge) throw new Error('mppx did not parse our challenge');
  const method = mppxEvmCharge({ account, authorization: { name: 'USDC', version: '2' } });
  const header = await method.createCredential({ challenge: challenge as never, context: {} as never });
  t.match(header, /^Payment [A-Za-z0-9_-]+$/, 'Authorization: Payment <base64url, no padding>');
  const parsed = parseAuthorizationPayment(header);
  t.ok(parsed.ok, message(parsed));
  if (!parsed.ok) return;
  const { challenge: echoed, payload, source } = parsed.value;
  t.equal(echoed.request, c.request, 'echoed request is byte-identical (mppx re-canonicalizes it)');
  t.same(verifyChallenge(KEY, echoed, Date.now()), { ok: true }, 'the echoed challenge verifies');
  t.equal(payload.type, 'authorization');
  t.equal(payload.from, account.address);
  t.equal(payload.to.toLowerCase(), RECIPIENT.toLowerCase());
  t.equal(payload.value, request.amount);
  t.equal(payload.validAfter, '0');
  t.equal(payload.validBefore, String(Math.floor(Date.parse(c.expires) / 1000)), 'validBefore = expires in unix seconds');
  t.equal(payload.nonce, expectedAuthorizationNonce(c.id, c.realm), 'nonce = keccak256(id + realm)');
  t.equal(payload.nonce, challengeHash({ id: c.id, realm: c.realm }), 'same as mppx challengeHash');
  t.equal(source, `did:pkh:eip155:84532:${account.address}`);
  t.ok(source !== undefined && sourceMatches(source, 84532, account.address.toLowerCase()));
  t.notOk(source !== undefined && sourceMatches(source, 8453, account.address));
  const signer = await recoverTypedDataAddress({
    domain: { name: 'USDC', version: '2', chainId: 84532, verifyingContract: USDC },
    types: transferWithAuthorizationTypes,
    primaryType: 'TransferWithAuthorization',
    message: { from: payload.from, to: payload.to, value: BigInt(payload.value), validAfter: 0n, validBefore: BigInt(payload.validBefore), nonce: payload.nonce },
    signature: payload.signature,
  });
  t.equal(signer, account.address, 'the signature is an EIP-3009 authorization by the payer');

  // mppx's server-side deserializer reads our serialization and vice versa.
  const back = Credential.deserialize(formatAuthorizationPayment(parsed.value));
  t.same(back.payload, payload);
  t.equal(back.challenge.id, c.id);
  const viaMppx = Credential.serialize({ challenge, payload, source: `did:pkh:eip155:84532:${account.address}` });
  t.same(parseAuthorizationPayment(viaMppx), parsed, 'Credential.serialize output parses to the same value');
});

t.test('credential rejections', async (t) => {
  const c = fresh();
  const payload: AuthorizationPayload = {
    type: 'authorization',
    from: '0x857b06519E91e3A54538791bDbb0E22373e36b66',
    to: RECIPIENT,
    value: '10000',
    validAfter: '0',
    validBefore: '1900000000',
    nonce: expectedAuthorizationNonce(c.id, c.realm),
    signature: `0x${'11'.repeat(65)}`,
  };
  const good: PaymentCredential = { challenge: c, payload };
  const enc = (v: unknown): string => `Payment ${encodeBase64Url(utf8(JSON.stringify(v)))}`;
  t.same(parseAuthorizationPayment(enc(good)), { ok: true, value: good });
  t.same(parseAuthorizationPayment(`  payment   ${enc(good).slice(8)}  `), { ok: true, value: good }, 'spacing around the token tolerated');
  t.ok(parseAuthorizationPayment(`PAYMENT ${enc(good).slice(8)}`).ok, 'scheme is case-insensitive');
  t.equal(code(parseAuthorizationPayment('Bearer abc')), 'missing_scheme');
  t.equal(code(parseAuthorizationPayment('')), 'missing_scheme');
  t.equal(code(parseAuthorizationPayment('Payment')), 'not_base64');
  t.equal(code(parseAuthorizationPayment('Payment a b')), 'not_base64');
  t.equal(code(parseAuthorizationPayment('Payment a+b/')), 'not_base64');
  t.equal(code(parseAuthorizationPayment(`Payment ${encodeBase64Url(utf8('{"challenge":'))}`)), 'not_json');
  t.equal(code(parseAuthorizationPayment(`Payment ${'A'.repeat(MAX_HEADER_BYTES)}`)), 'too_large');
  t.equal(code(parseAuthorizationPayment(enc({ ...good, challenge: { ...c, method: 'tempo' } }))), 'unsupported_method');
  t.equal(code(parseAuthorizationPayment(enc({ ...good, challenge: { ...c, intent: 'session' } }))), 'unsupported_method');
  const shape: Array<[unknown, string]> = [
    [{ ...good, payload: { ...payload, type: 'transaction' } }, '/payload/type'],
    [{ ...good, payload: { ...payload, extra: 1 } }, '/payload/extra'],
    [{ ...good, payload: { ...payload, value: (2n ** 256n).toString() } }, '/payload/value'],
    [{ ...good, payload: { ...payload, value: '-5' } }, '/payload/value'],
    [{ ...good, payload: { ...payload, value: 10000 } }, '/payload/value'],
    [{ ...good, payload: { ...payload, nonce: '0x1234' } }, '/payload/nonce'],
    [{ ...good, payload: { ...payload, signature: 'deadbeef' } }, '/payload/signature'],
    [{ ...good, payload: { ...payload, from: undefined } }, '/payload/from'],
    [{ ...good, challenge: { ...c, expires: undefined } }, '/challenge/expires'],
    [{ ...good, challenge: { ...c, request: { amount: '1' } } }, '/challenge/request'],
    [{ ...good, challenge: { ...c, opaque: { legacy: 'object' } } }, '/challenge/opaque'],
    [{ ...good, source: 'did:pkh:eip155:1:0x12' }, '/source'],
    [{ payload }, '/challenge'],
    [[], '/'],
  ];
  for (const [v, path] of shape) {
    const r = parseAuthorizationPayment(enc(v));
    t.equal(code(r), 'invalid_shape', path);
    t.match(message(r), path);
  }
  t.ok(parseAuthorizationPayment(enc({ ...good, challenge: { ...c, header: 'X-Payment' }, future: 1 })).ok, 'unknown echoed/top-level keys tolerated');
});

t.test('receipts: plain and signed', async (t) => {
  const receipt: PaymentReceipt = { status: 'success', method: 'evm', reference: `0x${'ab'.repeat(32)}`, timestamp: '2026-01-02T03:04:05Z', challengeId: 'abc', chainId: 84532 };
  const encoded = encodeReceipt(receipt);
  t.ok(encoded.ok);
  if (!encoded.ok) return;
  t.match(encoded.value, /^[A-Za-z0-9_-]+$/);
  t.same(decodeReceipt(encoded.value), { ok: true, value: receipt });
  t.same(Receipt.deserialize(encoded.value), receipt, 'mppx reads our receipt');
  t.equal(code(encodeReceipt({ ...receipt, timestamp: 'yesterday' })), 'invalid_value');
  t.equal(code(decodeReceipt(encodeBase64Url(utf8('{"status":"failed"}')))), 'invalid_shape');

  const gatewayKey = generatePrivateKey();
  const gateway = privateKeyToAccount(gatewayKey);
  const signed = await signReceipt(receipt, gatewayKey);
  t.ok(signed.ok);
  if (!signed.ok) return;
  t.equal(signed.value.signer, gateway.address);
  const msg = receiptSigningMessage(signed.value);
  t.ok(msg.ok && !msg.value.includes('signature') && msg.value.includes(gateway.address), 'signed text covers signer, not signature');
  const header = encodeReceipt(signed.value);
  t.ok(header.ok);
  if (!header.ok) return;
  t.same(await verifyReceipt(header.value, gateway.address.toLowerCase()), { ok: true, value: signed.value });
  const mppxView = Receipt.deserialize(header.value) as Record<string, unknown>;
  t.equal(mppxView.signature, signed.value.signature, 'mppx keeps our extra fields');
  // The documented client check, done by hand with viem only.
  const { signature, ...rest } = JSON.parse(Buffer.from(header.value, 'base64url').toString('utf8')) as Record<string, unknown>;
  const { verifyMessage } = await import('viem');
  t.ok(await verifyMessage({ address: gateway.address, message: (canonicalJson(rest) as { value: string }).value, signature: signature as Hex }), 'client-side recipe verifies');

  t.equal(code(await verifyReceipt(header.value, privateKeyToAccount(generatePrivateKey()).address)), 'signer_mismatch');
  const tamper = async (patch: Record<string, unknown>): Promise<CodecErrorCode | 'ok'> => {
    const e = encodeReceipt({ ...signed.value, ...patch } as never);
    return e.ok ? code(await verifyReceipt(e.value, gateway.address)) : e.error.code;
  };
  t.equal(await tamper({ reference: `0x${'cd'.repeat(32)}` }), 'invalid_signature');
  t.equal(await tamper({ chainId: 1 }), 'invalid_signature');
  t.equal(await tamper({ signature: `0x${'00'.repeat(65)}` }), 'invalid_signature');
  t.equal(await tamper({ signature: '0x1234' }), 'invalid_signature');
  t.equal(code(await verifyReceipt(encoded.value, gateway.address)), 'invalid_shape', 'an unsigned receipt does not verify');
  t.equal(code(await signReceipt(receipt, '0x1234')), 'invalid_value', 'bad private key');
});

t.test('problem+json bodies match mppx errors', async (t) => {
  const peers: Record<string, { toProblemDetails(id?: string): Record<string, unknown> }> = {
    'payment-required': new Errors.PaymentRequiredError({}),
    'payment-insufficient': new Errors.PaymentInsufficientError({}),
    'payment-expired': new Errors.PaymentExpiredError({}),
    'verification-failed': new Errors.VerificationFailedError({}),
    'malformed-credential': new Errors.MalformedCredentialError({}),
    'invalid-challenge': new Errors.InvalidChallengeError({}),
    'method-unsupported': new Errors.PaymentMethodUnsupportedError({}),
  };
  t.equal(PROBLEM_CODES.length, 7);
  for (const code of PROBLEM_CODES) {
    const p = problemJson(code, 'detail text', 'chal-1');
    t.same(p, { type: `https://paymentauth.org/problems/${code}`, title: p.title, status: code === 'method-unsupported' ? 400 : 402, detail: 'detail text', challengeId: 'chal-1' });
    const theirs = peers[code]?.toProblemDetails('chal-1');
    t.match(theirs, { type: p.type, title: p.title, status: p.status, challengeId: 'chal-1' }, `${code} agrees with mppx`);
  }
  t.notOk('challengeId' in problemJson('payment-required', 'x'), 'challengeId omitted when absent');
});

t.test('a salted challenge from a template: every slot but the salt under the HMAC, one id per challenge', async (t) => {
  const expires = new Date(Date.now() + 300_000);
  const description = 'Caf\u00e9 \u2014 "quoted" \\ x';
  const template = challengeTemplate({ realm: REALM, request, expires, description });
  t.ok(template.ok, message(template));
  if (!template.ok) return;
  const tag = routeTag('weather', 'forecast', 'GET');
  const salt = saltSource();
  for (const digest of [undefined, bodyDigest(utf8('{"model":"x"}'))]) {
    const s1 = salt();
    const issued = issueFromTemplate(template.value, templateMac(KEY, template.value, digest, tag), { ...(digest !== undefined && { digest }), opaqueHead: tag, salt: s1 });
    // The unsalted challenge with the route tag alone in opaque: its HMAC id is the salted id's head.
    const unsalted = createChallenge(KEY, { realm: REALM, request, expires, description, opaque: tag, ...(digest !== undefined && { digest }) });
    t.ok(unsalted.ok);
    if (!unsalted.ok) continue;
    t.equal(issued.id, `${unsalted.value.id}${s1}`, 'the id is the HMAC of every other slot, then the salt');
    t.equal(issued.header, formatWwwAuthenticate({ ...unsalted.value, id: issued.id, opaque: opaqueFor(tag, s1) }), 'same header text as formatWwwAuthenticate');
    const parsed = Challenge.deserialize(issued.header);
    t.equal(parsed.id, issued.id, 'mppx reads the id');
    t.equal(parsed.opaque, opaqueFor(tag, s1), 'mppx keeps opaque verbatim');
    t.equal(parsed.digest, digest);
    const fields = { ...unsalted.value, id: issued.id, opaque: opaqueFor(tag, s1) };
    t.same(verifyChallenge(KEY, fields, Date.now()), { ok: true }, 'our verifier accepts it');
    const mismatch = { ok: false, error: { code: 'invalid-challenge', message: 'challenge id does not match its fields' } };
    t.same(verifyChallenge(KEY, { ...fields, opaque: opaqueFor(routeTag('weather', 'geocode', 'GET'), s1) }, Date.now()), mismatch, 'the route in opaque is covered by the HMAC');
    t.same(verifyChallenge(KEY, { ...fields, id: `${unsalted.value.id}${salt()}` }, Date.now()), mismatch, 'the id carries the salt opaque carries');
    t.same(verifyChallenge(KEY, { ...fields, request: template.value.fields.request.replace(/.$/, 'A') }, Date.now()), mismatch, 'the request is covered');
    t.same(verifyChallenge(KEY, { ...fields, id: unsalted.value.id }, Date.now()), mismatch, 'a salted opaque needs the salted id');
  }
  const mac = templateMac(KEY, template.value, undefined, tag);
  const s2 = salt();
  const filled = fillHeader(headerTemplate(saltedHeaderParts(template.value)), [`${mac}${s2}`, `${tag}${s2}`]);
  t.equal(filled.value, issueFromTemplate(template.value, mac, { opaqueHead: tag, salt: s2 }).header, 'the header filled into its checked template is the one issueFromTemplate writes');
  const a = issueFromTemplate(template.value, mac, { opaqueHead: tag, salt: salt() });
  const b = issueFromTemplate(template.value, mac, { opaqueHead: tag, salt: salt() });
  t.not(a.id, b.id, 'two challenges of one route in one second have distinct ids');
  t.not(expectedAuthorizationNonce(a.id, REALM), expectedAuthorizationNonce(b.id, REALM), 'and so distinct EIP-3009 nonces');
});

t.test('route binding: the opaque route tag names merchant, route and method', async (t) => {
  const tag = routeTag('weather', 'forecast', 'GET');
  t.match(tag, new RegExp(`^[A-Za-z0-9_-]{${ROUTE_TAG_CHARS}}$`));
  t.equal(routeTag('weather', 'forecast', 'HEAD'), tag, 'HEAD is answered as GET');
  t.equal(boundMethod('HEAD'), 'GET');
  t.not(routeTag('weather', 'geocode', 'GET'), tag, 'another route');
  t.not(routeTag('fx', 'forecast', 'GET'), tag, 'another merchant');
  t.not(routeTag('weather', 'forecast', 'POST'), tag, 'another method');
  t.not(routeTag('weather\nforecast', '', 'GET'), routeTag('weather', '\nforecast', 'GET'));
  const salts = saltSource();
  const drawn = Array.from({ length: 10_000 }, salts);
  t.ok(
    drawn.every((s) => s.length === SALT_CHARS && /^[A-Za-z0-9_-]+$/.test(s)),
    'every salt is 16 base64url characters',
  );
  t.equal(new Set(drawn).size, drawn.length, 'no salt repeats across pool refills');
  const opaque = opaqueFor(tag, salts());
  t.match(opaque, /^[A-Za-z0-9_-]{40}$/, 'opaque is base64url');
  t.equal(Buffer.from(opaque, 'base64url').length, 30, 'of 30 bytes: tag and salt concatenate cleanly');
  t.ok(opaqueIsFor(opaque, tag));
  t.notOk(opaqueIsFor(opaque, routeTag('weather', 'geocode', 'GET')));
  t.notOk(opaqueIsFor(undefined, tag), 'a challenge without opaque is bound to nothing');
  t.notOk(opaqueIsFor(tag, tag), 'a tag without salt is not ours');
  t.notOk(opaqueIsFor(`${opaque}x`, tag));
  const fixed = saltSource(() => Buffer.alloc(24, 7), 2);
  t.same(
    [fixed(), fixed(), fixed()],
    [Buffer.alloc(12, 7).toString('base64url'), Buffer.alloc(12, 7).toString('base64url'), Buffer.alloc(12, 7).toString('base64url')],
    'the pool is refilled from the given source',
  );
});

t.test('body digest: as mppx BodyDigest computes it; mismatches explained', async (t) => {
  for (const text of ['{"amount":"1000"}', 'caf\u00e9 \ud83d\ude00', 'x'.repeat(100_000)]) {
    const d = bodyDigest(utf8(text));
    t.equal(d, BodyDigest.compute(text));
    t.ok(d !== undefined && BodyDigest.verify(d as `sha-256=${string}`, text));
  }
  t.equal(bodyDigest(new Uint8Array(0)), undefined, 'no digest for an empty body');
  const a = bodyDigest(utf8('a'));
  const b = bodyDigest(utf8('b'));
  t.equal(bodyMismatch(a, a), undefined);
  t.equal(bodyMismatch(undefined, undefined), undefined);
  t.match(bodyMismatch(a, b), /not the one/);
  t.match(bodyMismatch(a, undefined), /none was sent/);
  t.match(bodyMismatch(undefined, a), /without a body/);
});

t.test('fuzz: MPP decoders never throw and always return a typed result', async (t) => {
  let seed = 7;
  const rnd = (): number => {
    seed = (seed * 1664525 + 1013904223) >>> 0;
    return seed / 4294967296;
  };
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
  const c = fresh({ description: 'd' });
  const header = formatWwwAuthenticate(c);
  const credential = formatAuthorizationPayment({
    challenge: c,
    payload: { type: 'authorization', from: RECIPIENT, to: RECIPIENT, value: '1', validAfter: '0', validBefore: '2', nonce: `0x${'00'.repeat(32)}`, signature: '0x00' },
  });
  const alphabet = 'Payment id="realm=,\\ \t\r\n\u0000\u00ff\u20acAZaz09+/_-=';
  const hostileJson = ['{"challenge":{"id":1}}', '{"__proto__":{"x":1}}', '[[[[[[[[', JSON.stringify({ payload: { value: (2n ** 256n).toString() } }), 'null', '1e999', '"\\ud800"'];
  const mutateString = (s: string): string => {
    const i = Math.floor(rnd() * (s.length + 1));
    const r = rnd();
    if (r < 0.3) return s.slice(0, i);
    if (r < 0.6) return s.slice(0, i) + pick([...alphabet]) + s.slice(i + 1);
    if (r < 0.8) return s.slice(0, i) + s.slice(i, i + 8).repeat(3) + s.slice(i);
    return s.slice(0, i) + s.slice(i + 1);
  };
  const parsers: Array<(s: string) => Result<unknown>> = [parseWwwAuthenticate, parseAuthorizationPayment, decodeRequest, decodeReceipt];
  const allowed = new Set<string>([
    'too_large',
    'not_base64',
    'not_json',
    'invalid_shape',
    'unsupported_method',
    'invalid_syntax',
    'missing_scheme',
    'duplicate_parameter',
    'missing_parameter',
    'invalid_parameter',
  ]);
  let thrown = 0;
  let untyped = 0;
  let total = 0;
  for (let i = 0; i < 3000; i++) {
    const k = i % 5;
    const input =
      k === 0
        ? mutateString(header)
        : k === 1
          ? mutateString(credential)
          : k === 2
            ? Array.from({ length: Math.floor(rnd() * 80) }, () => pick([...alphabet])).join('')
            : k === 3
              ? `Payment ${encodeBase64Url(utf8(mutateString(pick(hostileJson))))}`
              : encodeBase64Url(Uint8Array.from({ length: Math.floor(rnd() * 120) }, () => Math.floor(rnd() * 256)));
    for (const p of parsers) {
      total++;
      try {
        const r = p(input);
        if (!r.ok && (!allowed.has(r.error.code) || !r.error.message)) untyped++;
      } catch {
        thrown++;
      }
    }
  }
  for (const p of parsers) {
    for (const v of [undefined, null, 1, {}, 'x'.repeat(100 * 1024)] as unknown[]) {
      total++;
      try {
        const r = p(v as string);
        if (r.ok || !allowed.has(r.error.code)) untyped++;
      } catch {
        thrown++;
      }
    }
  }
  // A few async verifications of garbage.
  for (let i = 0; i < 20; i++) {
    total++;
    try {
      const r = await verifyReceipt(
        mutateString(
          encodeBase64Url(utf8(JSON.stringify({ status: 'success', method: 'evm', reference: `0x${'ab'.repeat(32)}`, timestamp: '2026-01-01T00:00:00Z', signer: RECIPIENT, signature: '0x1234' }))),
        ),
        RECIPIENT,
      );
      if (r.ok) untyped++;
    } catch {
      thrown++;
    }
  }
  t.equal(thrown, 0, `no parser threw (${total} calls)`);
  t.equal(untyped, 0, 'every rejection carries a documented code');
});

t.test('header templates: parts checked once, fillers only base64url', async (t) => {
  const template = headerTemplate(['Payment id="', '", opaque="', '"']);
  t.equal(fillHeader(template, ['abc-_09', 'XYZ']).value, 'Payment id="abc-_09", opaque="XYZ"');
  t.throws(() => fillHeader(template, ['ok', 'bad\r\nSet-Cookie: x=1']), TypeError, 'CR/LF in a filler');
  t.throws(() => fillHeader(template, ['with "quote"', 'x']), TypeError, 'a quote in a filler');
  t.throws(() => fillHeader(template, ['only one']), TypeError, 'one filler per gap');
  t.throws(() => headerTemplate(['ok', 'line\nbreak']), TypeError, 'a part with a line break');
});
