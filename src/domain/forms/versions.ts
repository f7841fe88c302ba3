import type { Em } from '../../db/orm';
import { findFormVersion, insertFormVersion, lockFormVersion, setFormVersion } from './store';
import type { Field, FormStructure, Page } from './types';

// Form versions (README "Form versions"): a form's `version` is 1 at creation and +1 on each
// replacement of its structure, made in the replacing transaction under the form row's lock, so
// concurrent replacements get consecutive versions. Every version's pages and fields are kept
// unchanged in `form_versions`.
//
// The previous release (during a rolling deploy, or after a rollback) creates forms and replaces
// structures without keeping versions. So a form's current structure is checked against its kept
// current version wherever it is read whole (the form detail, the form cache's load): when that
// version is missing, it is recorded now; when it differs (a structure replaced without a version),
// the structure is recorded as the next version. What the previous release wrote is never lost to
// a version, and submissions name the version of the structure they were validated against.

/** Key order does not change a structure. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value).sort()
      .filter((k) => (value as any)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical((value as any)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/**
 * A structure as a version keeps it (pure): every page and field with the properties the form
 * detail shows, absent ones null (or false), in the shape `loadStructure` reads back, so that a
 * structure as written and as read compare equal.
 */
export function keptShape(structure: FormStructure): FormStructure {
  return {
    pages: structure.pages.map((page: Page) => ({
      id: page.id, title: page.title, description: page.description ?? null, order: page.order,
      conditionalLogic: page.conditionalLogic ?? null,
    })),
    fields: structure.fields.map((field: Field) => ({
      id: field.id, type: field.type, label: field.label, placeholder: field.placeholder ?? null,
      description: field.description ?? null, required: field.required, config: field.config ?? {},
      validationRules: field.validationRules ?? {}, order: field.order, pageId: field.pageId ?? null,
      conditionalLogic: field.conditionalLogic ?? null, hidden: field.hidden ?? false,
      ...(field.prefillParam ? { prefillParam: field.prefillParam } : {}),
    })),
  };
}

/** Whether a kept version holds exactly this structure (pure). */
export function sameStructure(structure: FormStructure, kept: { pages: unknown[]; fields: unknown[] }): boolean {
  const shaped = keptShape(structure);
  return canonical(shaped.pages) === canonical(kept.pages) && canonical(shaped.fields) === canonical(kept.fields);
}

/**
 * Keeps `structure` as the form's version, the form row locked by the caller (`lockFormVersion`),
 * `current` its version now: unchanged when that version is kept with this structure, otherwise
 * recorded as that version (not kept yet) or the next one. Returns the structure's version.
 */
export async function keepAsVersion(tx: Em, form: { id: string; organizationId: string; version: number }, structure: FormStructure,
  at: Date, opts: { next?: boolean } = {}): Promise<number> {
  const kept = await findFormVersion(tx, form.id, form.version);
  if (!opts.next && kept && sameStructure(structure, kept)) return form.version;
  const version = kept ? form.version + 1 : form.version;
  await insertFormVersion(tx, { formId: form.id, organizationId: form.organizationId, version, createdAt: at, ...keptShape(structure) });
  if (version !== form.version) await setFormVersion(tx, form.id, version);
  return version;
}

/**
 * The version of the form's current structure as read by the caller (`version`, `structure`),
 * recorded first if it is not kept (the previous release's writes). Cheap when it is: one read of
 * the kept version. Otherwise one transaction under the form's lock, which reads the structure
 * again (a replacement may have committed since the caller read it) and answers that one.
 */
export async function versionOf(
  em: Em, form: { id: string; version: number }, structure: FormStructure,
  load: (tx: Em) => Promise<FormStructure>,
): Promise<{ version: number; structure: FormStructure }> {
  const kept = await findFormVersion(em, form.id, form.version);
  if (kept && sameStructure(structure, kept)) return { version: form.version, structure };
  return em.fork().transactional(async (tx) => {
    const row = await lockFormVersion(tx, form.id);
    if (!row) return { version: form.version, structure };
    const current = await load(tx);
    const version = await keepAsVersion(tx, { id: form.id, organizationId: row.organization_id, version: row.version }, current, new Date());
    return { version, structure: current };
  });
}
