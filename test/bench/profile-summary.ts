import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

/**
 * Summarises a V8 `.cpuprofile` (node --cpu-prof) by where the time went: self time by origin (this
 * service's code, each npm package, Node.js itself, the garbage collector), the functions with the
 * most self time, and this service's own functions by inclusive time (a function's share counts
 * every sample with it anywhere on the stack, once however often it recurses). Shares are of the
 * busy samples (idle left out), so two profiles of different lengths or machine speeds compare.
 *
 * Usage: node_modules/.bin/node dist/test/bench/profile-summary.js FILE_OR_DIR [--top 25] [--own 40]
 * [--match name] [--callers name] [--skip seconds] (a directory: its newest .cpuprofile). `--match`
 * adds the inclusive share of each function whose name contains it, wherever it is defined (e.g.
 * `--match authenticate`); `--callers` the stacks (four frames) that a function's self time came
 * from (e.g. `--callers writev`); `--skip` leaves out the profile's first seconds (start-up: a
 * bench's service loads its modules and waits out the warm-up and the bare stack's phase);
 * `--exclude writev,writeString` leaves those functions' samples out of the shares. Why one would: V8
 * samples by the wall clock, and on a busy 2-core machine a write that wakes the process reading it
 * (PostgreSQL, the load generator, a libuv worker) often hands it the core, so the samples taken
 * until the writer runs again land in the write. The bench's kernel line says how much of the
 * process's CPU really was system calls (13 % in a 20-organization run, where writev held 27 % of
 * the samples).
 */

interface CallFrame { functionName: string; url: string; lineNumber: number; columnNumber: number }
interface ProfileNode { id: number; callFrame: CallFrame; children?: number[] }
export interface CpuProfile { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[]; startTime: number; endTime: number }

export interface ProfileSummary {
  busyMs: number;
  /** Samples of the functions left out (`exclude`), in neither busy nor idle. */
  excludedMs: number;
  /** Where the time of functions named `callers` was spent from: their callers, four frames up. */
  callers: Array<{ stack: string; ms: number; share: number }>;
  idleMs: number;
  byOrigin: Array<{ origin: string; ms: number; share: number }>;
  topSelf: Array<{ fn: string; ms: number; share: number }>;
  ownInclusive: Array<{ fn: string; ms: number; share: number }>;
  matched: Array<{ fn: string; ms: number; share: number }>;
}

/** Where a function comes from: `ours`, `npm:<package>`, `node`, or V8's pseudo-frames. */
export function originOf(url: string, functionName: string): string {
  if (!url) {
    if (functionName.startsWith('(')) return functionName; // (garbage collector), (program), (idle)
    return 'native';
  }
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + '/node_modules/'.length).split('/');
    return `npm:${rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]}`;
  }
  if (url.startsWith('node:') || !url.includes('/')) return 'node';
  return 'ours';
}

function label(frame: CallFrame): string {
  const file = frame.url ? frame.url.replace(/^file:\/\//, '').replace(/^.*\/(dist|node_modules)\//, '$1/') : '';
  return `${frame.functionName || '(anonymous)'} ${file}:${frame.lineNumber + 1}`;
}

export function summarise(profile: CpuProfile, opts: { top?: number; own?: number; match?: string; callers?: string; skipMs?: number; depth?: number; exclude?: string[] } = {}): ProfileSummary {
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  const selfUs = new Map<number, number>();
  let elapsedUs = 0;
  profile.samples.forEach((id, i) => {
    elapsedUs += profile.timeDeltas[i] ?? 0;
    if (elapsedUs >= (opts.skipMs ?? 0) * 1000) selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const callers = new Map<string, number>();

  let idleUs = 0;
  let busyUs = 0;
  let excludedUs = 0;
  const origin = new Map<string, number>();
  const selfByFn = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const matched = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const node = byId.get(id)!;
    if (node.callFrame.functionName === '(idle)') { idleUs += us; continue; }
    if (opts.exclude?.includes(node.callFrame.functionName)) { excludedUs += us; continue; }
    busyUs += us;
    const o = originOf(node.callFrame.url, node.callFrame.functionName);
    origin.set(o, (origin.get(o) ?? 0) + us);
    const fn = label(node.callFrame);
    selfByFn.set(fn, (selfByFn.get(fn) ?? 0) + us);
    if (opts.callers && node.callFrame.functionName === opts.callers) {
      const stack: string[] = [];
      for (let at = parent.get(id); at !== undefined && stack.length < (opts.depth ?? 4); at = parent.get(at)) stack.push(label(byId.get(at)!.callFrame));
      const key = stack.join(' < ');
      callers.set(key, (callers.get(key) ?? 0) + us);
    }
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = byId.get(at)!.callFrame;
      const name = label(frame);
      if (seen.has(name)) continue;
      seen.add(name);
      if (originOf(frame.url, frame.functionName) === 'ours') inclusive.set(name, (inclusive.get(name) ?? 0) + us);
      if (opts.match && frame.functionName.includes(opts.match)) matched.set(name, (matched.get(name) ?? 0) + us);
    }
  }
  const rows = (m: Map<string, number>, n: number) => [...m].sort((a, b) => b[1] - a[1]).slice(0, n)
    .map(([k, us]) => ({ k, ms: Math.round(us / 100) / 10, share: Math.round((1000 * us) / Math.max(busyUs, 1)) / 10 }));
  return {
    busyMs: Math.round(busyUs / 1000), idleMs: Math.round(idleUs / 1000), excludedMs: Math.round(excludedUs / 1000),
    byOrigin: rows(origin, 40).map(({ k, ms, share }) => ({ origin: k, ms, share })),
    topSelf: rows(selfByFn, opts.top ?? 25).map(({ k, ms, share }) => ({ fn: k, ms, share })),
    ownInclusive: rows(inclusive, opts.own ?? 40).map(({ k, ms, share }) => ({ fn: k, ms, share })),
    matched: rows(matched, 20).map(({ k, ms, share }) => ({ fn: k, ms, share })),
    callers: rows(callers, 15).map(({ k, ms, share }) => ({ stack: k, ms, share })),
  };
}

function newestProfile(target: string): string {
  if (!statSync(target).isDirectory()) return target;
  const files = readdirSync(target).filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => path.join(target, f)).sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
  if (!files.length) throw new Error(`no .cpuprofile in ${target}`);
  return files[0];
}

if (require.main === module) {
  const args = process.argv.slice(2);
  const option = (name: string) => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const target = args.find((a, i) => !a.startsWith('--') && !(i > 0 && args[i - 1].startsWith('--')));
  if (!target) {
    console.error('usage: profile-summary.js FILE_OR_DIR [--top 25] [--own 40] [--match name] [--callers name] [--skip seconds] [--exclude a,b]');
    process.exit(2);
  }
  const file = newestProfile(target);
  const s = summarise(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, {
    top: Number(option('top') ?? 25), own: Number(option('own') ?? 40), match: option('match'),
    exclude: option('exclude')?.split(','), callers: option('callers'), depth: Number(option('depth') ?? 4), skipMs: Number(option('skip') ?? 0) * 1000,
  });
  console.log(`${file}: busy ${s.busyMs} ms, idle ${s.idleMs} ms${s.excludedMs ? `, left out ${s.excludedMs} ms (${option('exclude')})` : ''}`
    + ' (shares below are of the busy time)');
  console.log('self time by origin:');
  console.table(s.byOrigin);
  console.log('functions by self time:');
  console.table(s.topSelf);
  console.log("this service's functions by inclusive time:");
  console.table(s.ownInclusive);
  if (option('match')) {
    console.log(`functions named *${option('match')}* by inclusive time:`);
    console.table(s.matched);
  }
  if (option('callers')) {
    console.log(`where ${option('callers')}'s self time was called from:`);
    console.table(s.callers);
  }
}
