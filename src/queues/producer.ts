import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { TickBatch } from '../lib/tick-batch';
import { bullmqTelemetry, inSpan, jobTraceMetadata } from '../lib/tracing';
import {
  DEFAULT_JOB_OPTIONS, jobIds, jobOptions, QUEUE_NAMES, type DeliveryGroupMember, type JobName, type JobOptions, type JobPayload, type QueueName,
} from './catalogue';

/** Queues whose jobs are added by id (the usage queue runs on schedulers). */
type IdQueue = Exclude<QueueName, 'usage'>;

/** Redis is not connected, or did not answer in time: the caller falls back (outbox, sweep) or answers 503. */
export class QueueUnavailableError extends Error {}

/** No request may wait on Redis for longer than this. */
const QUEUE_CALL_TIMEOUT_MS = 2_000;

interface PendingJob {
  name: string;
  data: unknown;
  opts: JobOptions & { telemetry?: { metadata?: string; omitContext?: boolean } };
}

/** A job's options that make its processing continue the trace `metadata` carries, when there is one. */
function inTrace(opts: JobOptions, metadata: string | undefined): PendingJob['opts'] {
  return metadata ? { ...opts, telemetry: { metadata } } : opts;
}

/** States of a job that will still run, or runs now. */
const LIVE_STATES: ReadonlySet<string> = new Set(['active', 'waiting', 'delayed', 'prioritized', 'waiting-children']);

/**
 * How many storing groups whose job was added are remembered, so a member handed over after its
 * group's job (never expected: members are handed over in the turn their group is answered) gets
 * a job of its own rather than joining a job that has gone.
 */
const ADDED_GROUPS_REMEMBERED = 10_000;

/**
 * The most deliveries one group job holds; the rest of a larger group (a batch of a hundred to a
 * form with many webhooks) get jobs of their own, so no job's data grows past a few kilobytes and
 * no first attempt waits behind hundreds of others.
 */
export const MAX_GROUP_MEMBERS = 100;

/**
 * The one place that adds jobs; typed by the catalogue, which also gives each job its id and
 * attempts (`retrySchedule` is the configured webhook/CRM delay list). `overrides` exist for tests
 * and for a delay.
 */
export class Producer {
  private readonly queues = new Map<QueueName, Queue>();
  /** Per queue, the jobs added in one tick (addSoon). */
  private readonly ticks = new Map<IdQueue, TickBatch<PendingJob, void>>();
  /** The deliveries handed over in one tick, by storing group (deliverSoon). */
  private readonly groupMembers = new TickBatch<{ group: string; member: DeliveryGroupMember }, void>((items) => this.addGroups(items));
  /** Groups whose job was added, oldest first. */
  private readonly addedGroups = new Set<string>();

  constructor(private readonly connection: Redis, prefix: string, private readonly retrySchedule?: readonly number[]) {
    // Each call waiting for the connection listens for it: one per request in flight at most.
    connection.setMaxListeners(0);
    for (const name of QUEUE_NAMES) {
      const queue = new Queue(name, { connection, prefix, defaultJobOptions: DEFAULT_JOB_OPTIONS[name], telemetry: bullmqTelemetry() });
      // Connection errors reach the callers of add(); unheard, they would end the process.
      queue.on('error', () => {});
      this.queues.set(name, queue);
    }
  }

  queue(name: QueueName): Queue {
    return this.queues.get(name)!;
  }

  /**
   * Runs `fn` once Redis is connected, all within QUEUE_CALL_TIMEOUT_MS. A BullMQ queue waits for
   * Redis with no time limit, so nothing is handed to it before the connection is ready: calls made
   * while Redis is away fail instead of piling up.
   */
  async bounded<T>(fn: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + QUEUE_CALL_TIMEOUT_MS;
    await this.connected(QUEUE_CALL_TIMEOUT_MS);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new QueueUnavailableError('Redis did not answer in time')), Math.max(0, deadline - Date.now()));
    });
    try {
      return await Promise.race([fn(), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** A Redis Cluster may report 'connect' rather than 'ready' once it is usable. */
  private isConnected(): boolean {
    const { status } = this.connection;
    return status === 'ready' || (status === 'connect' && (this.connection as { isCluster?: boolean }).isCluster === true);
  }

  private connected(timeoutMs: number): Promise<void> {
    if (this.isConnected()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onChange = () => {
        if (!this.isConnected()) return;
        clearTimeout(timer);
        this.connection.off('ready', onChange).off('connect', onChange);
        resolve();
      };
      const timer = setTimeout(() => {
        this.connection.off('ready', onChange).off('connect', onChange);
        reject(new QueueUnavailableError(`Redis is not connected (${this.connection.status})`));
      }, timeoutMs);
      this.connection.on('ready', onChange).on('connect', onChange);
    });
  }

  /** Runs `listener` each time the connection to Redis (re)opens, e.g. to restore what an emptied Redis forgot. */
  onConnected(listener: () => void): void {
    this.connection.on('ready', listener);
  }

  /**
   * Queues the job of a database row that is still owed work, whatever the queue remembers of it,
   * so that a job id derived from the row never runs twice at once and never starts a second chain:
   * - a job running now is left alone (it reads the row afresh when it settles): 'live';
   * - a waiting or delayed job is left alone ('live') unless `replaceWaiting`, which replaces it so
   *   its schedule gives way to `delay` (a manual retry runs now, not at the old retry time);
   * - a completed or failed job, or none at all (Redis forgot it), is (re)added: 'queued', unless
   *   `heldBy` names another job that holds the row's work (its delivery group's) and is live.
   */
  async requeue<Q extends IdQueue, N extends JobName<Q>>(
    queue: Q, name: N, payload: JobPayload<Q, N>, overrides: Partial<JobOptions> & { replaceWaiting?: boolean; promoteDelayed?: boolean; heldBy?: string | null } = {},
  ): Promise<'queued' | 'live'> {
    return this.bounded(() => this.requeueNow(queue, name, payload, { ...this.options(queue, name, payload), ...overrides }));
  }

  private options<Q extends IdQueue, N extends JobName<Q>>(queue: Q, name: N, payload: JobPayload<Q, N>): JobOptions {
    return jobOptions(queue, name, payload, this.retrySchedule);
  }

  private async requeueNow<Q extends QueueName, N extends JobName<Q>>(
    queue: Q, name: N, payload: JobPayload<Q, N>,
    opts: { jobId: string; delay?: number; attempts?: number; replaceWaiting?: boolean; promoteDelayed?: boolean; heldBy?: string | null },
  ): Promise<'queued' | 'live'> {
    const q = this.queue(queue);
    const existing = await q.getJob(opts.jobId);
    const state = existing ? await existing.getState() : 'unknown';
    if (state === 'active') return 'live';
    if (LIVE_STATES.has(state)) {
      if (existing && state === 'delayed' && opts.promoteDelayed && !opts.replaceWaiting) {
        // The row says it is due (a pause lifted, a hold released) while its job still waits out the old delay.
        try {
          await existing.promote();
          return 'queued';
        } catch {
          return 'live'; // promoted or taken meanwhile
        }
      }
      if (!opts.replaceWaiting) return 'live';
    } else if (opts.heldBy) {
      // Its own job has ended or never was: a live job holding the row still owns its next attempt.
      const holder = await q.getJob(opts.heldBy);
      if (holder && LIVE_STATES.has(await holder.getState())) return 'live';
    }
    if (existing) {
      try {
        await existing.remove();
      } catch {
        return 'live'; // a worker took it between the two calls: it is running now
      }
    }
    await q.add(name, payload, {
      jobId: opts.jobId, ...(opts.delay ? { delay: opts.delay } : {}), ...(opts.attempts ? { attempts: opts.attempts } : {}),
    });
    return 'queued';
  }

  async add<Q extends IdQueue, N extends JobName<Q>>(
    queue: Q, name: N, payload: JobPayload<Q, N>, overrides: Partial<JobOptions> = {},
  ): Promise<void> {
    const opts = { ...this.options(queue, name, payload), ...overrides };
    await this.bounded(() => this.queue(queue).add(name, payload, opts));
  }

  /** Many jobs of one queue in one round trip. */
  async addBulk<Q extends IdQueue, N extends JobName<Q>>(
    queue: Q, jobs: Array<{ name: N; data: JobPayload<Q, N>; opts?: Partial<JobOptions> }>,
  ): Promise<void> {
    const withOptions = jobs.map(({ name, data, opts }) => ({ name, data, opts: { ...this.options(queue, name, data), ...opts } }));
    if (jobs.length) await this.bounded(() => this.queue(queue).addBulk(withOptions));
  }

  /**
   * Adds a job together with the others added in the same tick: one `addBulk` round trip per queue
   * instead of one per job, which matters on the submission hot path. While Redis is down it fails
   * at once, so nothing piles up in memory: callers have the outbox to fall back on.
   */
  addSoon<Q extends IdQueue, N extends JobName<Q>>(
    queue: Q, name: N, payload: JobPayload<Q, N>, overrides: Partial<JobOptions> = {},
  ): Promise<void> {
    const opts = { ...this.options(queue, name, payload), ...overrides };
    if (!this.isConnected()) return Promise.reject(new QueueUnavailableError('Redis is not connected'));
    let tick = this.ticks.get(queue);
    if (!tick) {
      tick = new TickBatch((jobs) => this.addTogether(queue, jobs));
      this.ticks.set(queue, tick);
    }
    const batch = tick;
    // The batch is added in the context of whichever call came first in the tick: each job carries
    // the context of its own enqueue span instead, so its processing continues its own trace.
    return inSpan(`enqueue ${queue}.${name}`, { 'bullmq.queue.name': queue, 'bullmq.job.name': name, 'bullmq.job.id': opts.jobId }, () => {
      const metadata = jobTraceMetadata();
      return batch.call({ name, data: payload, opts: inTrace(opts, metadata) });
    }, 'producer');
  }

  /**
   * Queues a new delivery's first attempt with the others its storing group created (`group`, its
   * row's job_group): the members handed over in one tick become one `deliver-group` job, added in
   * one round trip with the tick's other groups. Without a group, or once its group's job was added,
   * the delivery gets a job of its own. Fails at once while Redis is down, like addSoon.
   */
  deliverSoon(deliveryId: string, group: string | null): Promise<void> {
    if (!group || this.addedGroups.has(group)) return this.addSoon('webhooks', 'deliver', { deliveryId });
    if (!this.isConnected()) return Promise.reject(new QueueUnavailableError('Redis is not connected'));
    const attributes = {
      'bullmq.queue.name': 'webhooks', 'bullmq.job.name': 'deliver-group', 'bullmq.job.id': jobIds.deliverGroup(group),
      'form_service.delivery.id': deliveryId,
    };
    return inSpan('enqueue webhooks.deliver', attributes, () => {
      const trace = jobTraceMetadata();
      return this.groupMembers.call({ group, member: trace ? { deliveryId, trace } : { deliveryId } });
    }, 'producer');
  }

  private async addGroups(items: Array<{ group: string; member: DeliveryGroupMember }>): Promise<void[]> {
    const members = new Map<string, DeliveryGroupMember[]>();
    for (const { group, member } of items) {
      const list = members.get(group);
      if (list) list.push(member);
      else members.set(group, [member]);
    }
    const jobs: PendingJob[] = [];
    for (const [group, all] of members) {
      this.rememberAdded(group);
      const data = { group, deliveries: all.slice(0, MAX_GROUP_MEMBERS) };
      // Each member continues its own trace (DeliveryGroupMember.trace), not the one this add runs in.
      jobs.push({ name: 'deliver-group', data, opts: { ...this.options('webhooks', 'deliver-group', data), telemetry: { omitContext: true } } });
      for (const { deliveryId, trace } of all.slice(MAX_GROUP_MEMBERS)) {
        const own = { deliveryId };
        jobs.push({ name: 'deliver', data: own, opts: inTrace(this.options('webhooks', 'deliver', own), trace) });
      }
    }
    return this.addTogether('webhooks', jobs).then(() => items.map(() => undefined));
  }

  private rememberAdded(group: string): void {
    this.addedGroups.add(group);
    if (this.addedGroups.size > ADDED_GROUPS_REMEMBERED) this.addedGroups.delete(this.addedGroups.values().next().value!);
  }

  private async addTogether(queue: IdQueue, jobs: PendingJob[]): Promise<void[]> {
    const q = this.queue(queue);
    // Alone in its tick, a job is a plain add: addBulk opens a MULTI pipeline, onto which ioredis
    // copies every script the connection knows (BullMQ's fifty-odd), about doubling the CPU of the add.
    const [first] = jobs;
    await this.bounded((): Promise<unknown> => (jobs.length === 1
      ? q.add(first.name, first.data, first.opts)
      : q.addBulk(jobs.map(({ name, data, opts }) => ({ name, data, opts })))));
    return jobs.map(() => undefined);
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()));
  }
}
