import type { Orm } from '../../db/orm';
import { TtlCache } from '../../lib/ttl-cache';
import type { FormStatus } from './entities';
import { loadStructure } from './form-service';
import { findLiveFormRow } from './store';
import type { FormTranslations } from './translations';
import { versionOf } from './versions';
import type { FormStructure } from './types';

export interface CachedForm {
  id: string;
  organizationId: string;
  title: string;
  description: string | null;
  status: FormStatus;
  settings: Record<string, any>;
  /** Translations of the texts per language tag (translations.ts); null: none. */
  translations?: FormTranslations | null;
  updatedAt: Date;
  /** The version of `structure` (forms/versions.ts): what submissions checked against it record. */
  version: number;
  structure: FormStructure;
}

/**
 * Forms as the submission path needs them, cached per process. Staleness is harmless: the
 * submission statement only inserts when the form's `updated_at` still equals the cached one.
 * Only published forms live in the main cache; ids that name no form, and forms that are not
 * published, are remembered briefly in a small cache of their own, so a flood of such ids can
 * never push live forms out.
 */
export class FormCache {
  private readonly published = new TtlCache<string, CachedForm>(60_000, 5_000);
  private readonly unservable = new TtlCache<string, CachedForm | null>(2_000, 1_000);
  /**
   * How many webhooks listened to each form's submissions at its last one: whether the next builds
   * the event payload. A hint only: the storing statement refuses a submission whose webhooks it
   * was not given deliveries for, and the caller retries with them (forgotten means none).
   */
  private readonly webhookHints = new TtlCache<string, number>(600_000, 10_000);

  constructor(private readonly orm: Orm) {}

  async get(formId: string, fresh = false): Promise<CachedForm | null> {
    if (!fresh) {
      const known = this.published.get(formId) ?? this.unservable.get(formId);
      if (known !== undefined) return known;
    }
    const form = await this.load(formId);
    this.invalidate(formId);
    if (form?.status === 'published') this.published.set(formId, form);
    else this.unservable.set(formId, form);
    return form;
  }

  webhookHint(formId: string): number {
    return this.webhookHints.get(formId) ?? 0;
  }

  noteWebhooks(formId: string, webhooks: number): void {
    if (this.webhookHints.get(formId) !== webhooks) this.webhookHints.set(formId, webhooks);
  }

  invalidate(formId: string): void {
    this.published.delete(formId);
    this.unservable.delete(formId);
  }

  /** Handles a cache invalidation announced by any process (`form:<id>`; anything else is not ours). */
  handleInvalidation(message: string): void {
    if (message.startsWith('form:')) this.invalidate(message.slice(5));
    else if (message === 'all') {
      this.published.clear();
      this.unservable.clear();
    }
  }

  private async load(formId: string): Promise<CachedForm | null> {
    const em = this.orm.em.fork();
    const row = await findLiveFormRow(em, formId);
    if (!row) return null;
    const { version, structure } = await versionOf(em, row, await loadStructure(em, formId), (tx) => loadStructure(tx, formId));
    return {
      id: row.id, organizationId: row.organization_id, title: row.title, description: row.description,
      status: row.status,
      settings: row.settings, translations: row.translations, updatedAt: new Date(row.updated_at), version, structure,
    };
  }
}
