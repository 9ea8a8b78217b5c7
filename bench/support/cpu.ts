import { readdirSync, readFileSync } from 'node:fs';

/**
 * CPU time used so far, in milliseconds, by this process and every process it started (the database, the
 * chain): read from /proc on Linux, where a benchmark that loads a whole machine can say how much CPU one
 * paid call costs across every part, not only its latency. Elsewhere, this process alone.
 */
export function cpuOfProcessTree(): { ms: number; processes: number } {
  const self = process.cpuUsage();
  const selfMs = (self.user + self.system) / 1000;
  let table: Array<{ pid: number; ppid: number; ticks: number }>;
  try {
    table = readdirSync('/proc').filter((name) => /^\d+$/.test(name)).flatMap((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        // Fields after the command (which may hold spaces), in parentheses: state, ppid, ..., utime (14), stime (15).
        const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        return [{ pid: Number(pid), ppid: Number(rest[1]), ticks: Number(rest[11]) + Number(rest[12]) }];
      } catch {
        return []; // gone meanwhile
      }
    });
  } catch {
    return { ms: selfMs, processes: 1 };
  }
  const children = new Map<number, number[]>();
  for (const p of table) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p.pid]);
  const ticks = new Map(table.map((p) => [p.pid, p.ticks]));
  let ms = selfMs;
  let processes = 1;
  const queue = [...(children.get(process.pid) ?? [])];
  while (queue.length) {
    const pid = queue.pop()!;
    // USER_HZ is 100 on every Linux build Node supports: one tick is 10 ms.
    ms += (ticks.get(pid) ?? 0) * 10;
    processes++;
    queue.push(...(children.get(pid) ?? []));
  }
  return { ms, processes };
}
