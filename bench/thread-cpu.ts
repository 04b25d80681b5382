import { readFileSync, readdirSync } from 'node:fs';

/** Milliseconds per tick of /proc's CPU times (USER_HZ, 100 on Linux). */
export const TICK_MS = 10;

/**
 * CPU ticks so far of every thread of this process's descendants (the browsers it launched), keyed
 * `process name/thread name#tid`, from /proc: unlike wall time on a shared machine, the CPU a run
 * costs each thread does not depend on the load. Empty where there is no /proc.
 */
export function threadTicks(): Map<string, number> {
  const parents = new Map<number, number>();
  const names = new Map<number, string>();
  let entries: string[] = [];
  try {
    entries = readdirSync('/proc');
  } catch {
    return new Map();
  }
  for (const entry of entries) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      parents.set(pid, Number(stat.slice(close + 2).split(' ')[1]));
      names.set(pid, stat.slice(stat.indexOf('(') + 1, close));
    } catch {
      // gone meanwhile
    }
  }
  const ours = (pid: number): boolean => {
    for (let p = pid, hops = 0; p > 1 && hops < 20; p = parents.get(p) ?? 0, hops++) if (p === process.pid) return true;
    return false;
  };
  const ticks = new Map<string, number>();
  for (const pid of parents.keys()) {
    if (pid === process.pid || !ours(pid)) continue;
    try {
      for (const tid of readdirSync(`/proc/${pid}/task`)) {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        const close = stat.lastIndexOf(')');
        const fields = stat.slice(close + 2).split(' ');
        const key = `${names.get(pid)}/${stat.slice(stat.indexOf('(') + 1, close)}#${tid}`;
        ticks.set(key, Number(fields[11]) + Number(fields[12]));
      }
    } catch {
      // gone meanwhile
    }
  }
  return ticks;
}

/** CPU milliseconds each thread used between two readings of threadTicks, those that used any. */
export function ticksBetween(before: Map<string, number>, after: Map<string, number>): Map<string, number> {
  const used = new Map<string, number>();
  for (const [thread, t] of after) {
    const ms = (t - (before.get(thread) ?? 0)) * TICK_MS;
    if (ms > 0) used.set(thread, ms);
  }
  return used;
}
