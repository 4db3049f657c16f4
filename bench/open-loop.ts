/**
 * Open-loop load: requests arrive at a fixed rate whatever the server answers, as buyers who do not wait for each
 * other arrive (load.ts is closed-loop: each connection waits for its answer before sending again, so a slow server
 * slows its own load down). Request i is due at start + i / rate; each is sent on a free keep-alive connection of a
 * pool (a new one when none is free, up to `maxConnections`), and its latency runs from when it was due, not from
 * when it was sent, so a request that waited for a connection or for the generator counts its wait.
 */
import { Pool } from 'undici';
import type { LoadRequest } from './load.ts';

export interface OpenLoopResult {
  /** The rate asked for, and the requests sent at it over `seconds`. */
  offeredPerSecond: number;
  sent: number;
  seconds: number;
  /** Answers per status code (`error` for a request that failed or timed out). */
  outcomes: Record<string, number>;
  /** From when each request was due to its answer, over every request. */
  p50ms: number;
  p90ms: number;
  p99ms: number;
  maxMs: number;
  /** How late the generator sent its latest request (ms): large means the generator, not the server, fell behind. */
  sendLagMs: number;
  /** The generator's own CPU over the run, in percent of one core. */
  loadGeneratorCpuPercent: number;
}

const ms = (value: number) => Number(value.toFixed(2));

/**
 * `requests.length` requests, request i due at i / `ratePerSecond` seconds after the start, all to one origin; resolves
 * once every one is answered or has failed (`timeoutMs` each, from when it was sent).
 */
export async function openLoop(requests: LoadRequest[], ratePerSecond: number, opts: { timeoutMs: number; maxConnections: number }): Promise<OpenLoopResult> {
  const first = requests[0];
  if (first === undefined) return { offeredPerSecond: ratePerSecond, sent: 0, seconds: 0, outcomes: {}, p50ms: 0, p90ms: 0, p99ms: 0, maxMs: 0, sendLagMs: 0, loadGeneratorCpuPercent: 0 };
  const origin = new URL(first.url).origin;
  const pool = new Pool(origin, { connections: opts.maxConnections, pipelining: 1, headersTimeout: opts.timeoutMs, bodyTimeout: opts.timeoutMs, connectTimeout: opts.timeoutMs });
  const latencies: number[] = [];
  const outcomes: Record<string, number> = {};
  const answers: Promise<void>[] = [];
  let sendLag = 0;
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  const send = (r: LoadRequest, due: number) => {
    const url = new URL(r.url);
    if (url.origin !== origin) throw new Error(`openLoop: every request must go to ${origin}, not ${r.url}`);
    const answered = pool
      .request({ path: `${url.pathname}${url.search}`, method: (r.method ?? 'GET') as 'GET', headers: r.headers ?? {}, body: r.body ?? null })
      .then(
        async (res) => {
          await res.body.dump();
          return String(res.statusCode);
        },
        () => 'error',
      )
      .then((outcome) => {
        outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
        latencies.push(performance.now() - due);
      });
    answers.push(answered);
  };
  try {
    let next = 0;
    while (next < requests.length) {
      const now = performance.now();
      for (; next < requests.length; next++) {
        const due = started + (next * 1000) / ratePerSecond;
        if (due > now) break;
        sendLag = Math.max(sendLag, now - due);
        send(requests[next] as LoadRequest, due);
      }
      if (next < requests.length) await new Promise((r) => setTimeout(r, Math.max(0, started + (next * 1000) / ratePerSecond - performance.now())));
    }
    const seconds = (performance.now() - started) / 1000;
    await Promise.all(answers);
    const cpu = process.cpuUsage(cpu0);
    const elapsed = (performance.now() - started) / 1000;
    latencies.sort((a, b) => a - b);
    const pct = (p: number) => ms(latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? 0);
    return {
      offeredPerSecond: ratePerSecond,
      sent: requests.length,
      seconds: ms(seconds),
      outcomes,
      p50ms: pct(0.5),
      p90ms: pct(0.9),
      p99ms: pct(0.99),
      maxMs: ms(latencies[latencies.length - 1] ?? 0),
      sendLagMs: ms(sendLag),
      loadGeneratorCpuPercent: Math.round(((cpu.user + cpu.system) / 1e6 / elapsed) * 100),
    };
  } finally {
    await pool.close();
  }
}
