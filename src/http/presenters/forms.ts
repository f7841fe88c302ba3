import type { Form } from '../../domain/forms/entities';
import type { FormDetail } from '../../domain/forms/form-service';
import { MASKED_SECRET, type Settings } from '../../domain/forms/settings';
import type { Field, Page } from '../../domain/forms/types';

export function presentFormSummary(form: Form) {
  return {
    id: form.id,
    title: form.title,
    description: form.description,
    slug: form.slug,
    status: form.status,
    createdAt: form.createdAt.toISOString(),
    updatedAt: form.updatedAt.toISOString(),
  };
}

function presentPage(page: Page) {
  return {
    id: page.id, title: page.title, description: page.description ?? null, order: page.order,
    conditionalLogic: page.conditionalLogic ?? null,
  };
}

export function presentField(field: Field) {
  return {
    id: field.id, type: field.type, label: field.label, placeholder: field.placeholder ?? null,
    description: field.description ?? null, required: field.required, config: field.config,
    validationRules: field.validationRules, order: field.order, pageId: field.pageId ?? null,
    conditionalLogic: field.conditionalLogic ?? null, hidden: field.hidden ?? false,
    ...(field.prefillParam ? { prefillParam: field.prefillParam } : {}),
  };
}

export function presentFormDetail(detail: FormDetail) {
  return {
    ...presentFormSummary(detail.form),
    version: detail.version,
    settings: presentSettings(detail.form.settings),
    translations: detail.form.translations ?? {},
    pages: detail.pages.map(presentPage),
    fields: detail.fields.map(presentField),
  };
}

/** What API reads show: tokens are write-only. */
export function presentSettings(settings: Settings): Settings {
  if (!Array.isArray(settings.integrations)) return settings;
  return {
    ...settings,
    integrations: settings.integrations.map((integration: any) =>
      integration && 'accessToken' in integration ? { ...integration, accessToken: MASKED_SECRET } : integration),
  };
}

/** An item of a form's versions (GET /v1/forms/{id}/versions). */
export function presentFormVersionItem(row: { version: number; created_at: Date | string; field_count: number }) {
  return { version: row.version, createdAt: new Date(row.created_at).toISOString(), fieldCount: row.field_count };
}

/** One kept version: its pages and fields as they were. */
export function presentFormVersion(row: { version: number; created_at: Date | string; pages: unknown[]; fields: unknown[] }) {
  return {
    version: row.version, createdAt: new Date(row.created_at).toISOString(),
    pages: (row.pages as Page[]).map(presentPage), fields: (row.fields as Field[]).map(presentField),
  };
}
