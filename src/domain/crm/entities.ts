import { Entity, PrimaryKey, Property } from '@mikro-orm/core';

export type CrmSyncStatus = 'pending' | 'succeeded' | 'failed';

@Entity({ tableName: 'crm_syncs' })
export class CrmSync {
  @PrimaryKey({ type: 'string' }) id!: string;
  @Property({ type: 'string' }) organizationId!: string;
  @Property({ type: 'string' }) formId!: string;
  @Property({ type: 'string' }) submissionId!: string;
  /** Position of the integration in the form's settings.integrations at fan-out time (informative). */
  @Property({ type: 'integer' }) integrationIndex!: number;
  /** The integration's stable id in the form's settings: what the sync is matched by. */
  @Property({ type: 'string', nullable: true }) integrationId: string | null = null;
  @Property({ type: 'string' }) provider!: string;
  @Property({ type: 'string' }) status: CrmSyncStatus = 'pending';
  @Property({ type: 'integer' }) attempts = 0;
  @Property({ type: 'integer', nullable: true }) lastStatusCode: number | null = null;
  @Property({ type: 'text', nullable: true }) lastError: string | null = null;
  @Property({ type: 'datetime', columnType: 'timestamptz', nullable: true }) nextAttemptAt: Date | null = null;
  @Property({ type: 'datetime', columnType: 'timestamptz' }) createdAt: Date = new Date();
  @Property({ type: 'datetime', columnType: 'timestamptz' }) updatedAt: Date = new Date();
}
