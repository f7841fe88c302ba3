import { readdirSync, readFileSync } from 'node:fs';

// CPU accounting for benchmarks, read from /proc: the whole machine (/proc/stat) and the processes
// that serve a request (the service, PostgreSQL, redis-server, the bench itself running autocannon).

const CLOCK_TICKS_PER_SECOND = 100; // USER_HZ, the unit of /proc/stat and /proc/<pid>/stat

/** CPU time (ms, user + system) a process has used so far, or 0 once it is gone. */
export function cpuMs(pid: number | 'self'): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND; // utime + stime
  } catch {
    return 0;
  }
}

/** The part of cpuMs spent in the kernel on the process's behalf (stime: system calls, a loopback send's delivery). */
export function systemCpuMs(pid: number | 'self'): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[12]) * 1000) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/** Non-idle CPU time (ms) of all CPUs together since boot: everything but idle and iowait. */
export function machineCpuMs(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0];
  // cpu user nice system idle iowait irq softirq steal guest guest_nice (guest time is already in user)
  const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
  return ((user + nice + system + irq + softirq + steal) * 1000) / CLOCK_TICKS_PER_SECOND;
}

/** A file of /proc/<pid>, or null once the process is gone. */
export function readProc(pid: number, file: string): string | null {
  try {
    return readFileSync(`/proc/${pid}/${file}`, 'utf8');
  } catch {
    return null;
  }
}

export function pids(): number[] {
  return readdirSync('/proc').filter((d) => /^\d+$/.test(d)).map(Number);
}

/** A process and its children (e.g. the postmaster with its backends and background processes). */
export function processTree(parentPid: number): number[] {
  return pids().filter((pid) => {
    if (pid === parentPid) return true;
    const stat = readProc(pid, 'stat');
    return stat !== null && Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === parentPid;
  });
}

/**
 * What a PostgreSQL process is, from the title it sets (`postgres: 15/main: user db host(port) state`
 * for a backend, `postgres: 15/main: walwriter` for a background process). The postmaster keeps
 * its command line.
 */
export function postgresRole(cmdline: string): { backendOf: string } | { background: string } {
  const title = cmdline.replace(/\0/g, ' ').trim();
  if (!title.startsWith('postgres:')) return { background: 'postmaster' };
  const rest = title.slice('postgres:'.length).trim().replace(/^\d+\/[^:\s]+:\s*/, ''); // the cluster name, when set
  const words = rest.split(/\s+/);
  if (words.length >= 3 && /^(\[local\]|.+\(\d+\))$/.test(words[2])) return { backendOf: words[1] };
  return { background: rest.replace(/\s+/g, ' ').replace(/ (idle|waiting)$/, '') };
}

export interface CpuSample {
  machine: number;
  /** The process under test (the service or the bare stack). */
  node: number;
  /** Its kernel part (systemCpuMs). */
  nodeSystem: number;
  /** The bench process: autocannon runs inside it (and it reads the service's log lines). */
  bench: number;
  redis: number;
  /** Per PostgreSQL pid: its CPU and what it is (`db:<name>` for a backend, else its title). */
  postgres: Map<number, { ms: number; role: string }>;
}

export function sampleCpu(nodePid: number): CpuSample {
  const postgres = new Map<number, { ms: number; role: string }>();
  let redis = 0;
  for (const pid of pids()) {
    const comm = readProc(pid, 'comm')?.trim();
    if (comm === 'redis-server') redis += cpuMs(pid);
    else if (comm === 'postgres') {
      const role = postgresRole(readProc(pid, 'cmdline') ?? '');
      postgres.set(pid, { ms: cpuMs(pid), role: 'backendOf' in role ? `db:${role.backendOf}` : role.background });
    }
  }
  return { machine: machineCpuMs(), node: cpuMs(nodePid), nodeSystem: systemCpuMs(nodePid), bench: cpuMs('self'), redis, postgres };
}

/** CPU ms used between two samples, by line of the report. */
export interface CpuUse {
  machine: number;
  node: number;
  /** The kernel's part of `node`. */
  nodeSystem: number;
  /** PostgreSQL, for this bench: the bench database's backends and every background process. */
  postgres: number;
  postgresBackends: number;
  /** Background processes by title (walwriter, checkpointer, …): they serve every database. */
  postgresBackground: Record<string, number>;
  /** Backends of other databases (other users of the machine): not counted in `postgres`. */
  postgresOtherDatabases: number;
  redis: number;
  bench: number;
  /** The machine's CPU that none of the above used (other users, the kernel's own threads). */
  unaccounted: number;
}

/**
 * CPU used between two samples. A process that appeared meanwhile counts from zero; one that ended
 * meanwhile (e.g. an autovacuum worker) is missed.
 */
export function cpuUsed(before: CpuSample, after: CpuSample, database: string): CpuUse {
  let postgresBackends = 0;
  let postgresOtherDatabases = 0;
  const postgresBackground: Record<string, number> = {};
  for (const [pid, { ms, role }] of after.postgres) {
    const prior = before.postgres.get(pid);
    const used = ms - (prior && prior.role === role ? prior.ms : 0); // a reused pid starts afresh
    if (role === `db:${database}`) postgresBackends += used;
    else if (role.startsWith('db:')) postgresOtherDatabases += used;
    else postgresBackground[role] = (postgresBackground[role] ?? 0) + used;
  }
  const background = Object.values(postgresBackground).reduce((a, b) => a + b, 0);
  const use = {
    machine: after.machine - before.machine,
    node: after.node - before.node,
    nodeSystem: after.nodeSystem - before.nodeSystem,
    postgres: postgresBackends + background,
    postgresBackends,
    postgresBackground,
    postgresOtherDatabases,
    redis: after.redis - before.redis,
    bench: after.bench - before.bench,
  };
  return { ...use, unaccounted: use.machine - use.node - use.postgres - use.postgresOtherDatabases - use.redis - use.bench };
}

/** ms per submission, 3 decimals. */
export function perSubmission(ms: number, submissions: number): number {
  return submissions > 0 ? Number((ms / submissions).toFixed(3)) : NaN;
}
