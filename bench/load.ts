/**
 * The benches' one load generator and process starter.
 *
 * A load generator sharing two cores with the server under test must cost far less than the server, or it measures
 * itself. So: one fixed request with no `classify` runs under `wrk` when it is on PATH (a C event loop, one thread:
 * a second would only take the server's core; GATE402_BENCH_GENERATOR=node opts out). Everything else runs here,
 * over raw keep-alive `node:net` connections that write a pre-encoded request and parse only the status line and
 * the body framing (Content-Length or chunked) of each response, keeping the body only when `classify` reads it.
 * Either way one request is in flight per connection (no pipelining), and the generator's own CPU is reported, so
 * a run whose generator was the bottleneck says so.
 */
import { Buffer } from 'node:buffer';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { clockTicksPerSecond } from './cpu.ts';

export interface LoadRequest {
  /** `http:` only; all requests of one run go to one origin. */
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
}

export interface LoadResult {
  requestsPerSecond: number;
  /** Requests answered, and the seconds from the first sent to the last answered. */
  requests: number;
  seconds: number;
  p50ms: number;
  p90ms: number;
  p99ms: number;
  /** Count per status code (`error` for a failed request), or per `classify` outcome when one is given. */
  outcomes: Record<string, number>;
  /** Which generator ran. */
  loadGenerator: 'wrk' | 'node';
  /** The generator's own CPU over the run, in percent of one core. */
  loadGeneratorCpuPercent: number;
}

/**
 * `connections` keep-alive connections, each sending its next request as soon as the previous answer is in, for
 * `seconds`, or until `make` returns undefined (then that connection stops). `make` is one request repeated, or a
 * function of the request's index and of the connection (0 to connections - 1) that sends it, so that requests which
 * must go in order (vouchers of one payment channel) can keep to one connection. `classify` names each answer from
 * its status, body and connection (default: the status code).
 */
export async function load(
  make: LoadRequest | ((i: number, connection: number) => LoadRequest | undefined),
  seconds: number,
  connections: number,
  classify?: (status: number, body: string, connection: number) => string,
): Promise<LoadResult> {
  if (typeof make === 'object' && classify === undefined && process.env.GATE402_BENCH_GENERATOR !== 'node' && wrkAvailable()) return loadWithWrk(make, seconds, connections);
  return loadWithNode(typeof make === 'object' ? () => make : make, seconds, connections, classify);
}

const ms = (value: number) => Number(value.toFixed(2));

function summarize(latenciesMs: number[], elapsedS: number, outcomes: Record<string, number>, loadGenerator: LoadResult['loadGenerator'], cpuS: number): LoadResult {
  latenciesMs.sort((a, b) => a - b);
  const pct = (p: number) => ms(latenciesMs[Math.min(latenciesMs.length - 1, Math.floor(latenciesMs.length * p))] ?? 0);
  return {
    requestsPerSecond: Math.round(latenciesMs.length / elapsedS),
    requests: latenciesMs.length,
    seconds: ms(elapsedS),
    p50ms: pct(0.5),
    p90ms: pct(0.9),
    p99ms: pct(0.99),
    outcomes,
    loadGenerator,
    loadGeneratorCpuPercent: Math.round((cpuS / elapsedS) * 100),
  };
}

// ---- node:net ----

const Parse = {
  Head: 0,
  Body: 1,
  ChunkSize: 2,
  ChunkData: 3,
  ChunkEnd: 4,
  Trailer: 5,
  UntilClose: 6,
} as const;
type Parse = (typeof Parse)[keyof typeof Parse];

const CONTENT_LENGTH = /\r\ncontent-length:[ \t]*(\d+)/i;
const CHUNKED = /\r\ntransfer-encoding:[^\r]*chunked/i;
const CONNECTION_CLOSE = /\r\nconnection:[ \t]*close/i;

/** Encodes one request for `origin`, once per distinct LoadRequest object. */
function encoder(origin: URL): (r: LoadRequest) => { bytes: Buffer; head: boolean } {
  const cache = new WeakMap<LoadRequest, { bytes: Buffer; head: boolean }>();
  return (r) => {
    const hit = cache.get(r);
    if (hit) return hit;
    const url = new URL(r.url);
    if (url.protocol !== 'http:' || url.host !== origin.host) throw new Error(`load: every request must go to ${origin.origin}, not ${r.url}`);
    const method = r.method ?? 'GET';
    const body = r.body === undefined ? undefined : Buffer.from(r.body, 'utf8');
    let head = `${method} ${url.pathname}${url.search} HTTP/1.1\r\nhost: ${url.host}\r\n`;
    for (const [name, value] of Object.entries(r.headers ?? {})) head += `${name}: ${value}\r\n`;
    if (body !== undefined) head += `content-length: ${body.length}\r\n`;
    head += '\r\n';
    const made = { bytes: body === undefined ? Buffer.from(head, 'latin1') : Buffer.concat([Buffer.from(head, 'latin1'), body]), head: method === 'HEAD' };
    cache.set(r, made);
    return made;
  };
}

async function loadWithNode(
  make: (i: number, connection: number) => LoadRequest | undefined,
  seconds: number,
  connections: number,
  classify?: (status: number, body: string, connection: number) => string,
): Promise<LoadResult> {
  const first = make(0, 0);
  if (first === undefined) return summarize([], 1, {}, 'node', 0);
  const origin = new URL(first.url);
  const encode = encoder(origin);
  const port = Number(origin.port || 80);
  const host = origin.hostname.replace(/^\[|\]$/g, '');
  const latencies: number[] = [];
  const outcomes: Record<string, number> = {};
  const record = (outcome: string, t0: number) => {
    outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
    latencies.push(performance.now() - t0);
  };
  let next = 0;
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  const until = started + seconds * 1000;

  /** One connection's loop; resolves when time is up or `make` ran out. Reconnects after an error or a close. */
  const run = (_: unknown, connection: number) =>
    new Promise<void>((done) => {
      let socket: Socket;
      let t0 = 0;
      let inFlight = false;
      let isHead = false;
      let state: Parse = Parse.Head;
      let status = 0;
      let remaining = 0;
      let closeAfter = false;
      let pending: Buffer | undefined;
      let parts: Buffer[] = [];

      const send = () => {
        if (performance.now() >= until) return finish();
        const i = next++;
        const job = i === 0 ? first : make(i, connection); // make(0) already ran, and a job may be single-use
        if (job === undefined) return finish();
        const encoded = encode(job);
        isHead = encoded.head;
        state = Parse.Head;
        parts = [];
        inFlight = true;
        t0 = performance.now();
        socket.write(encoded.bytes);
      };
      const finish = () => {
        socket.destroy();
        done();
      };
      const complete = () => {
        inFlight = false;
        record(classify ? classify(status, Buffer.concat(parts).toString('utf8'), connection) : String(status), t0);
        if (closeAfter) {
          socket.destroy();
          open();
        } else send();
      };
      const keep = (data: Buffer, from: number, to: number) => {
        if (classify) parts.push(data.subarray(from, to));
      };
      const onData = (chunk: Buffer) => {
        const data = pending === undefined ? chunk : Buffer.concat([pending, chunk]);
        pending = undefined;
        let pos = 0;
        while (pos < data.length && inFlight) {
          switch (state) {
            case Parse.Head: {
              const end = data.indexOf('\r\n\r\n', pos, 'latin1');
              if (end < 0) {
                pending = data.subarray(pos);
                return;
              }
              const head = data.toString('latin1', pos, end + 2);
              pos = end + 4;
              status = Number(head.slice(9, 12));
              if (status < 200) continue; // 100 Continue and the like: the real answer follows
              closeAfter = CONNECTION_CLOSE.test(head);
              if (isHead || status === 204 || status === 304) {
                complete();
                continue;
              }
              if (CHUNKED.test(head)) state = Parse.ChunkSize;
              else {
                const length = CONTENT_LENGTH.exec(head);
                if (length === null) state = Parse.UntilClose;
                else {
                  remaining = Number(length[1]);
                  if (remaining === 0) complete();
                  else state = Parse.Body;
                }
              }
              continue;
            }
            case Parse.Body:
            case Parse.ChunkData: {
              const take = Math.min(remaining, data.length - pos);
              keep(data, pos, pos + take);
              pos += take;
              remaining -= take;
              if (remaining === 0) {
                if (state === Parse.Body) complete();
                else state = Parse.ChunkEnd;
              }
              continue;
            }
            case Parse.ChunkSize:
            case Parse.Trailer: {
              const eol = data.indexOf('\r\n', pos, 'latin1');
              if (eol < 0) {
                pending = data.subarray(pos);
                return;
              }
              if (state === Parse.Trailer) {
                if (eol === pos) complete(); // the empty line after the (usually absent) trailers
              } else {
                remaining = parseInt(data.toString('latin1', pos, eol), 16); // stops at a chunk extension's `;`
                state = remaining === 0 ? Parse.Trailer : Parse.ChunkData;
              }
              pos = eol + 2;
              continue;
            }
            case Parse.ChunkEnd:
              if (data.length - pos < 2) {
                pending = data.subarray(pos);
                return;
              }
              pos += 2;
              state = Parse.ChunkSize;
              continue;
            case Parse.UntilClose:
              keep(data, pos, data.length);
              pos = data.length;
              continue;
          }
        }
      };
      const open = () => {
        pending = undefined;
        const s = connect({ host, port });
        socket = s;
        s.setNoDelay(true);
        s.on('data', onData);
        s.on('error', () => {}); // 'close' follows and decides
        s.on('close', () => {
          if (s !== socket || !inFlight) return; // a socket this loop already left behind
          inFlight = false;
          if (state === Parse.UntilClose) record(classify ? classify(status, Buffer.concat(parts).toString('utf8'), connection) : String(status), t0);
          else record('error', t0);
          if (performance.now() < until) open();
          else done();
        });
        send();
      };
      open();
    });

  await Promise.all(Array.from({ length: connections }, run));
  const elapsed = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return summarize(latencies, elapsed, outcomes, 'node', (cpu.user + cpu.system) / 1e6);
}

// ---- wrk ----

let wrkFound: boolean | undefined;
function wrkAvailable(): boolean {
  wrkFound ??= spawnSync('wrk', ['--version']).error === undefined;
  return wrkFound;
}

/**
 * Per-status counts across wrk's threads, latency percentiles, and wrk's own CPU time (clock ticks from
 * /proc/self/stat, read once the load has stopped), printed as one line for {@link loadWithWrk}.
 */
const WRK_SCRIPT = `
wrk.method = os.getenv("LOAD_METHOD")
wrk.body = os.getenv("LOAD_BODY")
local threads = {}
function setup(thread) table.insert(threads, thread) end
counts = {}
function response(status, headers, body) counts[status] = (counts[status] or 0) + 1 end
function done(summary, latency, requests)
  local outcomes = {}
  for _, t in ipairs(threads) do
    for status, n in pairs(t:get("counts")) do table.insert(outcomes, string.format('"%d":%d', status, n)) end
  end
  local e = summary.errors
  local failed = e.connect + e.read + e.write + e.timeout
  if failed > 0 then table.insert(outcomes, string.format('"error":%d', failed)) end
  local f = io.open("/proc/self/stat")
  local stat = f:read("*a")
  f:close()
  local fields = {}
  for field in stat:match("%) (.*)"):gmatch("%S+") do table.insert(fields, field) end
  io.write(string.format('\\nLOAD {"requests":%d,"durationUs":%d,"p50us":%d,"p90us":%d,"p99us":%d,"cpuTicks":%d,"outcomes":{%s}}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90), latency:percentile(99), tonumber(fields[12]) + tonumber(fields[13]), table.concat(outcomes, ",")))
end
`;

async function loadWithWrk(r: LoadRequest, seconds: number, connections: number): Promise<LoadResult> {
  const dir = mkdtempSync(join(tmpdir(), 'gate402-wrk-'));
  const script = join(dir, 'load.lua');
  writeFileSync(script, WRK_SCRIPT);
  const args = ['-t1', `-c${connections}`, `-d${seconds}s`, '-s', script];
  for (const [name, value] of Object.entries(r.headers ?? {})) args.push('-H', `${name}: ${value}`);
  args.push(r.url);
  const env: Record<string, string | undefined> = { ...process.env, LOAD_METHOD: r.method ?? 'GET' };
  if (r.body !== undefined) env.LOAD_BODY = r.body;
  try {
    const out = await new Promise<string>((res, rej) => {
      const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'], env });
      let text = '';
      child.stdout.on('data', (d: Buffer) => (text += d.toString()));
      child.stderr.on('data', (d: Buffer) => (text += d.toString()));
      child.once('error', rej);
      child.once('exit', (code) => (code === 0 ? res(text) : rej(new Error(`wrk exited ${code}:\n${text}`))));
    });
    const line = /^LOAD (\{.*\})$/m.exec(out);
    if (!line) throw new Error(`wrk printed no result:\n${out}`);
    const w = JSON.parse(line[1] as string) as { requests: number; durationUs: number; p50us: number; p90us: number; p99us: number; cpuTicks: number; outcomes: Record<string, number> };
    const elapsed = w.durationUs / 1e6;
    const cpuPercent = Math.round((w.cpuTicks / clockTicksPerSecond() / elapsed) * 100);
    return {
      requestsPerSecond: Math.round(w.requests / elapsed),
      requests: w.requests,
      seconds: ms(elapsed),
      p50ms: ms(w.p50us / 1000),
      p90ms: ms(w.p90us / 1000),
      p99ms: ms(w.p99us / 1000),
      outcomes: w.outcomes,
      loadGenerator: 'wrk',
      loadGeneratorCpuPercent: cpuPercent,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---- processes ----

/**
 * Starts a server process and resolves once `ready` finds what it waits for in the process's output so far (stdout
 * and stderr): a server listens on port 0 and prints the address it got, so no port is guessed ahead of it.
 */
export function startChild<T>(args: string[], env: Record<string, string>, ready: (output: string) => T | undefined): Promise<{ child: ChildProcess; found: T }> {
  // GATE402_BENCH_CPU_PROF=dir: every server writes a V8 CPU profile there when it stops (node --cpu-prof).
  const profiled = process.env.GATE402_BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.GATE402_BENCH_CPU_PROF}`] : [];
  const child = spawn(process.execPath, [...profiled, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, GATE402_LOG_LEVEL: 'error', ...env } });
  return new Promise((res, rej) => {
    let out = '';
    let done = false;
    const onData = (d: Buffer) => {
      out += d.toString();
      const found = done ? undefined : ready(out);
      if (found !== undefined) {
        done = true;
        res({ child, found });
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => rej(new Error(`${args.join(' ')} exited ${code}:\n${out}`)));
  });
}

/** The origin a bench peer printed once listening (`listening on http://127.0.0.1:<port>`). */
export function listeningOn(output: string): string | undefined {
  return /^listening on (http:\/\/[^\s]+)$/m.exec(output)?.[1];
}

/**
 * Peak resident memory of a process under test, from Linux's /proc/<pid>/status (VmHWM, in MiB); undefined where
 * there is no /proc. {@link resetPeakRss} first, and the figure covers only what ran since.
 */
export function peakRssMb(pid: number | undefined): number | undefined {
  try {
    const kb = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return kb ? Math.round(Number(kb[1]) / 1024) : undefined;
  } catch {
    return undefined;
  }
}

/** Sets a process's peak resident memory back to its current one (Linux: `5` into /proc/<pid>/clear_refs). */
export function resetPeakRss(pid: number | undefined): void {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
  } catch {
    // no /proc, or not ours: the peak then covers the process's whole life, which is still an upper bound
  }
}

export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const stuck = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(stuck);
}
