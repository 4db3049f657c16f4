import t from 'tap';
import { TokenBucketLimiter } from '../src/http/rate-limit.ts';
import { facilitatorHttpConfigFromEnv } from '../src/facilitator/config.ts';
import { ipRateLimitKey, normalizeIp, formatBinaryAddress } from '../src/http/ip.ts';
import { clientIp, parseTrustProxy } from '../src/http/trust-proxy.ts';

function clock(start = 1_000_000) {
  let ms = start;
  return {
    now: () => ms,
    advance: (d: number) => {
      ms += d;
    },
  };
}

t.test('a fresh key gets the whole burst, then is refused', async (t) => {
  const c = clock();
  const l = new TokenBucketLimiter({ capacity: 5, refillPerSecond: 1, now: c.now });
  for (let i = 0; i < 5; i++) t.same(l.take('a'), { allowed: true }, `take ${i + 1} of the burst`);
  t.same(l.take('a'), { allowed: false, retryAfterSeconds: 1 }, 'sixth is refused');
  t.same(l.take('b'), { allowed: true }, 'another key has its own bucket');
  t.equal(l.tokens('a'), 0, 'a refused take costs nothing');
});

t.test('tokens refill continuously and cap at capacity', async (t) => {
  const c = clock();
  const l = new TokenBucketLimiter({ capacity: 4, refillPerSecond: 2, now: c.now });
  for (let i = 0; i < 4; i++) l.take('k');
  t.equal(l.tokens('k'), 0);
  c.advance(250);
  t.equal(l.tokens('k'), 0.5, 'half a token after 250 ms at 2/s');
  t.equal(l.take('k').allowed, false, 'half a token is not enough');
  c.advance(250);
  t.same(l.take('k'), { allowed: true }, 'one token after 500 ms');
  c.advance(60_000);
  t.equal(l.tokens('k'), 4, 'never above capacity');
  for (let i = 0; i < 4; i++) t.equal(l.take('k').allowed, true);
  t.equal(l.take('k').allowed, false, 'burst is capacity again, not more');
});

t.test('retryAfterSeconds rounds up to whole seconds and is at least 1', async (t) => {
  const c = clock();
  const fast = new TokenBucketLimiter({ capacity: 2, refillPerSecond: 20, now: c.now });
  fast.take('k');
  fast.take('k');
  t.same(fast.take('k'), { allowed: false, retryAfterSeconds: 1 }, '50 ms to go still says 1 s');

  const slow = new TokenBucketLimiter({ capacity: 3, refillPerSecond: 0.4, now: c.now });
  for (let i = 0; i < 3; i++) slow.take('k');
  t.same(slow.take('k'), { allowed: false, retryAfterSeconds: 3 }, '2.5 s to one token -> 3');
  c.advance(500);
  t.same(slow.take('k'), { allowed: false, retryAfterSeconds: 2 }, '2.0 s to go -> exactly 2, no float drift to 3');
  t.same(slow.take('k', 3), { allowed: false, retryAfterSeconds: 7 }, 'cost 3 with 0.2 left: 7 s');
  c.advance(2000);
  t.same(slow.take('k'), { allowed: true }, 'allowed once the advertised wait has passed');
});

t.test('costs: multi-token takes, and invalid costs throw', async (t) => {
  const c = clock();
  const l = new TokenBucketLimiter({ capacity: 10, refillPerSecond: 1, now: c.now });
  t.same(l.take('k', 7), { allowed: true });
  t.same(l.take('k', 4), { allowed: false, retryAfterSeconds: 1 });
  t.same(l.take('k', 3), { allowed: true });
  t.throws(() => l.take('k', 11), RangeError, 'more than capacity can never succeed');
  t.throws(() => l.take('k', 0), RangeError);
  t.throws(() => l.take('k', Number.NaN), RangeError);
  t.throws(() => new TokenBucketLimiter({ capacity: 0, refillPerSecond: 1 }), RangeError);
  t.throws(() => new TokenBucketLimiter({ capacity: 1, refillPerSecond: 0 }), RangeError);
  t.throws(() => new TokenBucketLimiter({ capacity: 1, refillPerSecond: 1, maxKeys: 0 }), RangeError);
});

t.test('a clock going backwards does not mint tokens', async (t) => {
  const c = clock();
  const l = new TokenBucketLimiter({ capacity: 2, refillPerSecond: 1, now: c.now });
  l.take('k');
  l.take('k');
  c.advance(-10_000);
  t.equal(l.take('k').allowed, false);
  c.advance(10_500);
  t.equal(l.take('k').allowed, false, 'progress is measured from the latest time seen');
  c.advance(500);
  t.equal(l.take('k').allowed, true);
});

t.test('memory stays bounded: LRU eviction at maxKeys, idle full buckets dropped', async (t) => {
  const c = clock();
  const l = new TokenBucketLimiter({ capacity: 3, refillPerSecond: 1, maxKeys: 100, now: c.now });
  for (let i = 0; i < 10_000; i++) l.take(`ip-${i}`);
  t.ok(l.size <= 100, `size ${l.size} <= maxKeys`);

  // keep one key "hot": it must survive a flood of other keys because it is recently used
  const m = new TokenBucketLimiter({ capacity: 3, refillPerSecond: 0.001, maxKeys: 10, now: c.now });
  m.take('hot');
  m.take('hot');
  m.take('hot');
  for (let i = 0; i < 50; i++) {
    m.take(`other-${i}`);
    t.equal(m.take('hot').allowed, false, 'hot key stays limited');
  }
  t.ok(m.size <= 10);

  // a bucket that refilled to capacity is indistinguishable from none: it is swept
  const s = new TokenBucketLimiter({ capacity: 2, refillPerSecond: 10, now: c.now });
  for (let i = 0; i < 20; i++) s.take(`k-${i}`);
  t.equal(s.size, 20);
  c.advance(1000);
  for (let i = 0; i < 10; i++) s.take(`fresh-${i}`);
  t.ok(s.size < 20, `idle buckets swept (size ${s.size})`);
  t.equal(s.tokens('k-0'), 2, 'a swept key starts full, which is what it had anyway');
  const full = new TokenBucketLimiter({ capacity: 2, refillPerSecond: 1, now: c.now });
  full.take('x', 1);
  c.advance(5000);
  full.take('y', 1);
  t.equal(full.size, 1, 'x was full again and is gone; y is tracked');
});

t.test('client IP normalisation used as the rate-limit key', async (t) => {
  t.equal(normalizeIp(' 1.2.3.4 '), '1.2.3.4');
  t.equal(normalizeIp('1.2.3.4:8080'), '1.2.3.4');
  t.equal(normalizeIp('::ffff:1.2.3.4'), '1.2.3.4', 'IPv4-mapped IPv6 becomes IPv4');
  t.equal(normalizeIp('::1.2.3.4'), '::102:304', 'IPv4-compatible IPv6 is another address: it does not share the IPv4 key');
  t.equal(normalizeIp('fe80::1%eth0'), undefined, 'zone ids are refused');
  t.equal(normalizeIp('[2001:DB8:0:0:0:0:0:1]:443'), '2001:db8::1');
  t.equal(normalizeIp('0000:0000:0000:0000:0000:ffff:7f00:0001'), '127.0.0.1', 'uWS text form of a mapped address');
  t.equal(normalizeIp('unknown'), undefined);
  t.equal(normalizeIp('1.2.3.999'), undefined);
  t.equal(formatBinaryAddress(new Uint8Array([10, 0, 0, 7]).buffer), '10.0.0.7');
  t.equal(formatBinaryAddress(new Uint8Array([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 127, 0, 0, 1]).buffer), '127.0.0.1');
  t.equal(formatBinaryAddress(new Uint8Array([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]).buffer), '::1');
  t.equal(ipRateLimitKey('1.2.3.4'), '1.2.3.4');
  t.equal(ipRateLimitKey('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64');
  t.equal(ipRateLimitKey('2001:db8:1:2::9'), '2001:db8:1:2::/64', 'same /64, same key');
  t.equal(ipRateLimitKey('::1'), '0:0:0:0::/64');
});

t.test('behind trusted proxies the client is the right-most untrusted X-Forwarded-For hop', async (t) => {
  const peer = '10.0.0.2'; // the nearest proxy
  // The client wrote "6.6.6.6" itself; its real address 203.0.113.7 was appended by the first proxy.
  const xff = '6.6.6.6, 203.0.113.7';
  t.equal(clientIp(peer, xff, false), peer, 'off: the socket peer');
  t.equal(clientIp(peer, xff, parseTrustProxy('true')), '203.0.113.7', 'one proxy: the right-most entry, not the left-most');
  t.equal(clientIp(peer, `${xff}, 10.0.0.9`, parseTrustProxy('2')), '203.0.113.7', 'two proxies');
  t.equal(clientIp(peer, xff, parseTrustProxy('5')), '6.6.6.6', 'more proxies counted than hops: the left-most there is');
  t.equal(clientIp(peer, undefined, parseTrustProxy('1')), peer, 'no header: the peer');
  t.equal(clientIp(peer, 'garbage', parseTrustProxy('1')), peer, 'an unreadable hop: the last address known');
  t.equal(clientIp(peer, '6.6.6.6, garbage', parseTrustProxy('2')), peer, 'never an address left of an unreadable hop');
  const cidrs = parseTrustProxy('10.0.0.0/8, ::1');
  t.equal(clientIp(peer, `${xff}, 10.1.2.3`, cidrs), '203.0.113.7', 'listed proxies are skipped from the right');
  t.equal(clientIp('198.51.100.1', xff, cidrs), '198.51.100.1', 'a peer that is not a listed proxy is the client itself');
  t.equal(clientIp('::1', '[2001:db8::5]:443', cidrs), '2001:db8::5');
  t.equal(clientIp(peer, '::ffff:203.0.113.7', cidrs), '203.0.113.7', 'canonical spelling');
  t.equal(clientIp(peer, '10.0.0.3, 10.0.0.4', cidrs), '10.0.0.3', 'only proxies: the left-most');
  t.same(parseTrustProxy(undefined), false);
  t.same(parseTrustProxy('off'), false);
  t.same(parseTrustProxy('0'), false);
  t.throws(() => parseTrustProxy('maybe'), /proxy count/);
  t.throws(() => parseTrustProxy('99'), /at most/);
});

t.test('facilitatorHttpConfigFromEnv: defaults, parsing, and errors naming the variable', async (t) => {
  t.same(facilitatorHttpConfigFromEnv({}), {
    host: '127.0.0.1',
    port: 8403,
    maxBodyBytes: 65536,
    rateLimit: { capacity: 50, refillPerSecond: 20 },
    trustProxy: false,
  });
  t.same(
    facilitatorHttpConfigFromEnv({
      GATE402_FACILITATOR_HOST: '0.0.0.0',
      GATE402_FACILITATOR_PORT: '0',
      GATE402_FACILITATOR_MAX_BODY_BYTES: '1024',
      GATE402_FACILITATOR_RATE_CAPACITY: '5',
      GATE402_FACILITATOR_RATE_PER_SECOND: '0.5',
      GATE402_TRUST_PROXY: 'TRUE',
    }),
    { host: '0.0.0.0', port: 0, maxBodyBytes: 1024, rateLimit: { capacity: 5, refillPerSecond: 0.5 }, trustProxy: { hops: 1 } },
  );
  t.equal(facilitatorHttpConfigFromEnv({ GATE402_FACILITATOR_PORT: '' }).port, 8403, 'empty means unset');
  const bad: [string, string][] = [
    ['GATE402_FACILITATOR_PORT', '70000'],
    ['GATE402_FACILITATOR_PORT', '80a'],
    ['GATE402_FACILITATOR_MAX_BODY_BYTES', '0'],
    ['GATE402_FACILITATOR_MAX_BODY_BYTES', '-1'],
    ['GATE402_FACILITATOR_RATE_CAPACITY', '1.5'],
    ['GATE402_FACILITATOR_RATE_PER_SECOND', '0'],
    ['GATE402_FACILITATOR_RATE_PER_SECOND', 'fast'],
    ['GATE402_TRUST_PROXY', 'maybe'],
    ['GATE402_FACILITATOR_HOST', 'a b'],
  ];
  for (const [name, value] of bad) {
    t.throws(() => facilitatorHttpConfigFromEnv({ [name]: value }), { message: new RegExp(name) }, `${name}=${value}`);
  }
});
