/**
 * CPU time of the processes under test, as Linux accounts it in /proc/<pid>/stat: user + system time of every
 * thread (utime, stime) and of the children it has waited for (cutime, cstime), summed over the process and its
 * live descendants, so a server that forks (or runs worker threads) is charged for all of its work. Read before and
 * after a measured window; the difference is what the window cost. The clock tick is 10 ms on most systems: a
 * window of a few paid requests may read 0.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

let ticks: number | undefined;
/** The unit of /proc/<pid>/stat times (`getconf CLK_TCK`, 100 on Linux). */
export function clockTicksPerSecond(): number {
  if (ticks === undefined) {
    try {
      ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticks = 100;
    }
  }
  return ticks;
}

/** utime + stime + cutime + cstime of one process, in clock ticks, from the text of its /proc/<pid>/stat; undefined when unreadable. */
export function statCpuTicks(stat: string): number | undefined {
  // The command name (field 2) is in parentheses and may hold spaces: the fields that follow start after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state): utime, stime, cutime, cstime are fields 14-17.
  const times = fields.slice(11, 15).map(Number);
  return times.length === 4 && times.every((n) => Number.isInteger(n) && n >= 0) ? times.reduce((a, b) => a + b, 0) : undefined;
}

function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** The live children of `pid`: those of each of its threads (/proc/<pid>/task/<tid>/children). */
function childrenOf(pid: number): number[] {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  return tids.flatMap((tid) => (read(`/proc/${pid}/task/${tid}/children`) ?? '').split(/\s+/).filter(Boolean).map(Number));
}

/**
 * CPU seconds (user + system) `pid` and its live descendants have used so far; undefined where there is no /proc or
 * the process is gone.
 */
export function processCpuSeconds(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  const own = statCpuTicks(read(`/proc/${pid}/stat`) ?? '');
  if (own === undefined) return undefined;
  let total = own;
  const seen = new Set([pid]);
  const queue = childrenOf(pid);
  while (queue.length > 0) {
    const child = queue.shift() as number;
    if (seen.has(child)) continue;
    seen.add(child);
    total += statCpuTicks(read(`/proc/${child}/stat`) ?? '') ?? 0;
    queue.push(...childrenOf(child));
  }
  return total / clockTicksPerSecond();
}

/** What a measured window cost the processes under test. */
export interface CpuFigures {
  /** CPU seconds of each process (by role) over the window; undefined where /proc could not tell. */
  seconds: Record<string, number | undefined>;
  /** Their sum, undefined unless every process was read. */
  totalSeconds: number | undefined;
  /** Requests answered 200 in the window. */
  answered200: number;
  /** CPU milliseconds per request answered 200: each process's, and all of them together (undefined without a 200). */
  msPer200: Record<string, number | undefined> & { total: number | undefined };
}

const round = (x: number, digits: number) => Number(x.toFixed(digits));

/** Starts a measured window over `processes` (pids by role); `end(answered200)` closes it and says what it cost. */
export function cpuWindow(processes: Record<string, number | undefined>): { end(answered200: number): CpuFigures } {
  const before = Object.fromEntries(Object.entries(processes).map(([role, pid]) => [role, processCpuSeconds(pid)]));
  return {
    end(answered200) {
      const seconds: Record<string, number | undefined> = {};
      for (const [role, pid] of Object.entries(processes)) {
        const start = before[role];
        const now = processCpuSeconds(pid);
        seconds[role] = start === undefined || now === undefined ? undefined : round(now - start, 3);
      }
      const values = Object.values(seconds);
      const totalSeconds = values.every((v) => v !== undefined) ? round(values.reduce((a, b) => (a as number) + (b as number), 0) as number, 3) : undefined;
      const per = (s: number | undefined) => (s === undefined || answered200 === 0 ? undefined : round((s * 1000) / answered200, 3));
      return {
        seconds,
        totalSeconds,
        answered200,
        msPer200: { ...Object.fromEntries(Object.entries(seconds).map(([role, s]) => [role, per(s)])), total: per(totalSeconds) },
      };
    },
  };
}
