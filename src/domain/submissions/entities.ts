import { Entity, PrimaryKey, Property } from '@mikro-orm/core';

export type SubmissionSource = 'api' | 'public';

@Entity({ tableName: 'submissions' })
export class Submission {
  @PrimaryKey({ type: 'string' }) id!: string;
  @Property({ type: 'string' }) organizationId!: string;
  @Property({ type: 'string' }) formId!: string;
  /** Keyed by field id; sensitive values are sealed (`{"$sealed": "enc:v1:…"}`). */
  @Property({ type: 'json' }) data!: Record<string, unknown>;
  @Property({ type: 'text', nullable: true }) submitterEmail: string | null = null;
  @Property({ type: 'text', nullable: true }) submitterName: string | null = null;
  @Property({ type: 'string' }) source!: SubmissionSource;
  /** The hosted page's language when it was submitted; null for API submissions. */
  @Property({ type: 'text', nullable: true }) language: string | null = null;
  @Property({ type: 'datetime', columnType: 'timestamptz' }) createdAt: Date = new Date();
}

/**
 * An organization's submissions counted in a month: a read-only view summing the month's counter
 * slots (`usage_counter_slots`, written only by submissions/storing-statement.ts and quota-slots.ts).
 */
@Entity({ tableName: 'usage_counters', readonly: true })
export class UsageCounter {
  @PrimaryKey({ type: 'string' }) organizationId!: string;
  /** Calendar month in UTC, `YYYY-MM`. */
  @PrimaryKey({ type: 'string' }) month!: string;
  @Property({ type: 'integer' }) used = 0;
}

@Entity({ tableName: 'payment_claims' })
export class PaymentClaim {
  @PrimaryKey({ type: 'string' }) paymentIntentId!: string;
  @Property({ type: 'string' }) organizationId!: string;
  @Property({ type: 'string' }) submissionId!: string;
  @Property({ type: 'datetime', columnType: 'timestamptz' }) createdAt: Date = new Date();
}

@Entity({ tableName: 'idempotency_keys' })
export class IdempotencyRecord {
  @PrimaryKey({ type: 'string' }) organizationId!: string;
  @PrimaryKey({ type: 'string' }) key!: string;
  @Property({ type: 'string' }) requestHash!: string;
  /** Null while the key's first request is still in progress. */
  @Property({ type: 'integer', nullable: true }) responseStatus!: number | null;
  @Property({ type: 'json', nullable: true }) responseBody!: unknown;
  @Property({ type: 'text', nullable: true }) claimToken: string | null = null;
  @Property({ type: 'datetime', columnType: 'timestamptz', nullable: true }) leaseExpiresAt: Date | null = null;
  @Property({ type: 'datetime', columnType: 'timestamptz' }) createdAt: Date = new Date();
}

/** Written in the submission's transaction; relayed to the queue after commit or by the sweep. */
@Entity({ tableName: 'outbox' })
export class OutboxEvent {
  @PrimaryKey({ type: 'bigint', autoincrement: true }) id?: string;
  @Property({ type: 'string' }) topic!: string;
  @Property({ type: 'json' }) payload!: Record<string, string>;
  @Property({ type: 'datetime', columnType: 'timestamptz' }) createdAt: Date = new Date();
  @Property({ type: 'datetime', columnType: 'timestamptz', nullable: true }) processedAt: Date | null = null;
}

@Entity({ tableName: 'usage_rollups' })
export class UsageRollup {
  @PrimaryKey({ type: 'string' }) organizationId!: string;
  @PrimaryKey({ type: 'string' }) formId!: string;
  @PrimaryKey({ type: 'string' }) month!: string;
  @Property({ type: 'integer' }) submissions = 0;
  @Property({ type: 'datetime', columnType: 'timestamptz' }) updatedAt: Date = new Date();
}
