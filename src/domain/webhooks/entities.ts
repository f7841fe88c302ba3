import { Entity, PrimaryKey, Property } from '@mikro-orm/core';

@Entity({ tableName: 'webhooks' })
export class Webhook {
  @PrimaryKey({ type: 'string' }) id!: string;
  @Property({ type: 'string' }) organizationId!: string;
  @Property({ type: 'string', nullable: true }) formId: string | null = null;
  @Property({ type: 'string' }) name!: string;
  @Property({ type: 'text' }) url!: string;
  @Property({ type: 'json' }) events!: string[];
  @Property({ type: 'boolean' }) enabled = true;
  /** Sealed with ENCRYPTION_KEY. */
  @Property({ type: 'text' }) secretSealed!: string;
  /** The secret a rotation replaced, sealed; deliveries are also signed with it until it expires. */
  @Property({ type: 'text', nullable: true }) previousSecretSealed: string | null = null;
  @Property({ type: 'datetime', columnType: 'timestamptz', nullable: true }) previousSecretExpiresAt: Date | null = null;
  /** Deliveries a second at most, across every worker process; null: unlimited. */
  @Property({ type: 'integer', nullable: true }) throttleRate: number | null = null;
  /** Until when a receiver's 429 with Retry-After holds the webhook's deliveries back. */
  @Property({ type: 'datetime', columnType: 'timestamptz', nullable: true }) pausedUntil: Date | null = null;
  /**
   * Start of the current run of failed deliveries: the first failure after a minute without a
   * recorded success; cleared by any success (policy.ts, STREAK_QUIET_MS).
   */
  @Property({ type: 'datetime', columnType: 'timestamptz', nullable: true }) failingSince: Date | null = null;
  /** When a delivery last succeeded, written at most every SUCCESS_MARK_MS (policy.ts). */
  @Property({ type: 'datetime', columnType: 'timestamptz', nullable: true }) lastSuccessAt: Date | null = null;
  @Property({ type: 'datetime', columnType: 'timestamptz' }) createdAt: Date = new Date();
  @Property({ type: 'datetime', columnType: 'timestamptz' }) updatedAt: Date = new Date();
}

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed';

@Entity({ tableName: 'webhook_deliveries' })
export class WebhookDelivery {
  @PrimaryKey({ type: 'string' }) id!: string;
  @Property({ type: 'string' }) webhookId!: string;
  @Property({ type: 'string' }) organizationId!: string;
  @Property({ type: 'string' }) eventId!: string;
  @Property({ type: 'string' }) eventType!: string;
  /** The event body without signature; re-signed on every attempt. */
  @Property({ type: 'text' }) payload!: string;
  @Property({ type: 'string' }) status: DeliveryStatus = 'pending';
  @Property({ type: 'integer' }) attempts = 0;
  /** Attempts made before the current retry schedule began (a manual retry starts a new one). */
  @Property({ type: 'integer' }) retryBase = 0;
  @Property({ type: 'integer', nullable: true }) lastStatusCode: number | null = null;
  @Property({ type: 'text', nullable: true }) lastError: string | null = null;
  @Property({ type: 'datetime', columnType: 'timestamptz', nullable: true }) nextAttemptAt: Date | null = null;
  /** The storing group whose one job (`deliver-group-<jobGroup>`) holds its first attempt; null when queued on its own. */
  @Property({ type: 'text', nullable: true }) jobGroup: string | null = null;
  @Property({ type: 'datetime', columnType: 'timestamptz' }) createdAt: Date = new Date();
  @Property({ type: 'datetime', columnType: 'timestamptz' }) updatedAt: Date = new Date();
}

@Entity({ tableName: 'delivery_attempts' })
export class DeliveryAttempt {
  @PrimaryKey({ type: 'bigint', autoincrement: true }) id?: string;
  @Property({ type: 'string' }) deliveryId!: string;
  @Property({ type: 'integer' }) attemptNo!: number;
  @Property({ type: 'integer', nullable: true }) statusCode: number | null = null;
  @Property({ type: 'text', nullable: true }) error: string | null = null;
  @Property({ type: 'integer' }) durationMs!: number;
  @Property({ type: 'text', nullable: true }) responseExcerpt: string | null = null;
  @Property({ type: 'datetime', columnType: 'timestamptz' }) createdAt: Date = new Date();
}
