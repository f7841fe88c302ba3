import { Entity, PrimaryKey, Property } from '@mikro-orm/core';
import type { ConditionalLogic, FieldType } from './types';

export type FormStatus = 'draft' | 'published' | 'archived';
export const FORM_STATUSES: readonly FormStatus[] = ['draft', 'published', 'archived'];

@Entity({ tableName: 'forms' })
export class Form {
  @PrimaryKey({ type: 'string' }) id!: string;
  @Property({ type: 'string' }) organizationId!: string;
  @Property({ type: 'string' }) title!: string;
  @Property({ type: 'text', nullable: true }) description: string | null = null;
  @Property({ type: 'string', nullable: true }) slug: string | null = null;
  @Property({ type: 'string' }) status: FormStatus = 'draft';
  /** Integration secrets inside settings are sealed (see forms/settings.ts). */
  @Property({ type: 'json' }) settings: Record<string, any> = {};
  /** Translations of the form's texts per language tag (forms/translations.ts); null: none. */
  @Property({ type: 'json', nullable: true }) translations: Record<string, any> | null = null;
  /** The structure's version: 1 at creation, +1 on each replacement (forms/versions.ts). */
  @Property({ type: 'integer' }) version = 1;
  @Property({ type: 'datetime', columnType: 'timestamptz' }) createdAt: Date = new Date();
  @Property({ type: 'datetime', columnType: 'timestamptz' }) updatedAt: Date = new Date();
  @Property({ type: 'datetime', columnType: 'timestamptz', nullable: true }) deletedAt: Date | null = null;
}

@Entity({ tableName: 'form_pages' })
export class FormPage {
  @PrimaryKey({ type: 'bigint', autoincrement: true }) pk?: string;
  @Property({ type: 'string' }) formId!: string;
  @Property({ type: 'string' }) pageId!: string;
  @Property({ type: 'string' }) title!: string;
  @Property({ type: 'text', nullable: true }) description: string | null = null;
  @Property({ type: 'integer' }) position!: number;
  @Property({ type: 'json', nullable: true }) conditionalLogic: ConditionalLogic | null = null;
}

@Entity({ tableName: 'form_fields' })
export class FormField {
  @PrimaryKey({ type: 'bigint', autoincrement: true }) pk?: string;
  @Property({ type: 'string' }) formId!: string;
  @Property({ type: 'string' }) fieldId!: string;
  @Property({ type: 'string', nullable: true }) pageId: string | null = null;
  @Property({ type: 'string' }) type!: FieldType;
  @Property({ type: 'text' }) label!: string;
  @Property({ type: 'text', nullable: true }) placeholder: string | null = null;
  @Property({ type: 'text', nullable: true }) description: string | null = null;
  @Property({ type: 'boolean' }) required = false;
  @Property({ type: 'json' }) config: Record<string, any> = {};
  @Property({ type: 'json' }) validationRules: Record<string, any> = {};
  @Property({ type: 'integer' }) position!: number;
  @Property({ type: 'json', nullable: true }) conditionalLogic: ConditionalLogic | null = null;
  @Property({ type: 'boolean' }) hidden = false;
  @Property({ type: 'string', nullable: true }) prefillParam: string | null = null;
}

@Entity({ tableName: 'form_analytics_daily' })
export class FormAnalyticsDay {
  @PrimaryKey({ type: 'string' }) formId!: string;
  @PrimaryKey({ type: 'date' }) day!: string;
  @Property({ type: 'integer' }) views = 0;
  @Property({ type: 'integer' }) starts = 0;
  @Property({ type: 'integer' }) completions = 0;
}
