import { Entity, PrimaryKey, Property } from '@mikro-orm/core';
import type { Plan } from '../../../config/plans';

@Entity({ tableName: 'organizations' })
export class Organization {
  @PrimaryKey({ type: 'string' }) id!: string;
  @Property({ type: 'string' }) name!: string;
  @Property({ type: 'string' }) plan!: Plan;
  /** Overrides the plan's monthly submission quota when set. */
  @Property({ type: 'integer', nullable: true }) monthlyQuota: number | null = null;
  @Property({ type: 'datetime', columnType: 'timestamptz' }) createdAt: Date = new Date();
  @Property({ type: 'datetime', columnType: 'timestamptz', onUpdate: () => new Date() }) updatedAt: Date = new Date();
}

@Entity({ tableName: 'api_keys' })
export class ApiKey {
  @PrimaryKey({ type: 'string' }) id!: string;
  @Property({ type: 'string' }) organizationId!: string;
  @Property({ type: 'string' }) name!: string;
  /** SHA-256 of the whole key; the key itself is never stored. */
  @Property({ type: 'string', unique: true }) keyHash!: string;
  @Property({ type: 'string' }) prefix!: string;
  @Property({ type: 'string' }) last4!: string;
  @Property({ type: 'json' }) scopes!: string[];
  @Property({ type: 'datetime', columnType: 'timestamptz' }) createdAt: Date = new Date();
  @Property({ type: 'datetime', columnType: 'timestamptz', nullable: true }) expiresAt: Date | null = null;
  @Property({ type: 'datetime', columnType: 'timestamptz', nullable: true }) lastUsedAt: Date | null = null;
  @Property({ type: 'datetime', columnType: 'timestamptz', nullable: true }) revokedAt: Date | null = null;
}
