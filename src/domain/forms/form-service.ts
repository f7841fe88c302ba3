import { LockMode } from '@mikro-orm/core';
import type { Em } from '../../db/orm';
import { newId } from '../../lib/ids';
import { Form, FormField, FormPage, type FormStatus } from './entities';
import { sealSettings } from './settings';
import { keptTranslations, type FormTranslations } from './translations';
import type { Field, FormStructure, Page } from './types';
import { keepAsVersion, versionOf } from './versions';

export interface FormDetail {
  form: Form;
  /** The version of these pages and fields (forms/versions.ts). */
  version: number;
  pages: Page[];
  fields: Field[];
}

export interface FormInput {
  title: string;
  description?: string | null;
  slug?: string | null;
  status?: FormStatus;
  settings?: Record<string, any>;
  /** Checked against the structure already (translationErrors). */
  translations?: FormTranslations;
}

export type FormPatch = Partial<Pick<FormInput, 'title' | 'description' | 'slug' | 'status'>>;

export class SlugTakenError extends Error {
  constructor() {
    super('slug is already used by another form of this organization');
  }
}

const LIVE = { deletedAt: null };

function toPage(row: FormPage): Page {
  return {
    id: row.pageId, title: row.title, description: row.description, order: row.position,
    conditionalLogic: row.conditionalLogic,
  };
}

function toField(row: FormField): Field {
  return {
    id: row.fieldId, type: row.type, label: row.label, placeholder: row.placeholder,
    description: row.description, required: row.required, config: row.config,
    validationRules: row.validationRules, order: row.position, pageId: row.pageId,
    conditionalLogic: row.conditionalLogic, hidden: row.hidden,
    ...(row.prefillParam ? { prefillParam: row.prefillParam } : {}),
  };
}

function structureRows(em: Em, formId: string, structure: FormStructure): void {
  for (const page of structure.pages) {
    em.persist(Object.assign(new FormPage(), {
      formId, pageId: page.id, title: page.title, description: page.description ?? null,
      position: page.order, conditionalLogic: page.conditionalLogic ?? null,
    }));
  }
  for (const field of structure.fields) {
    em.persist(Object.assign(new FormField(), {
      formId, fieldId: field.id, pageId: field.pageId ?? null, type: field.type, label: field.label,
      placeholder: field.placeholder ?? null, description: field.description ?? null,
      required: field.required, config: field.config, validationRules: field.validationRules,
      position: field.order, conditionalLogic: field.conditionalLogic ?? null,
      hidden: field.hidden ?? false, prefillParam: field.prefillParam ?? null,
    }));
  }
}

function isSlugViolation(err: any): boolean {
  return err?.code === '23505' && String(err?.constraint ?? err?.message).includes('forms_org_slug_live_uniq');
}

async function flushGuardingSlug<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (isSlugViolation(err)) throw new SlugTakenError();
    throw err;
  }
}

/** Every query filters by the organization: another organization's form is simply absent. */
export async function listForms(em: Em, organizationId: string): Promise<Form[]> {
  return em.find(Form, { organizationId, ...LIVE }, { orderBy: { updatedAt: 'desc', id: 'desc' }, limit: 100 });
}

export async function findForm(em: Em, organizationId: string, formId: string): Promise<Form | null> {
  return em.findOne(Form, { id: formId, organizationId, ...LIVE });
}

export async function loadStructure(em: Em, formId: string): Promise<FormStructure> {
  const [pages, fields] = await Promise.all([
    em.find(FormPage, { formId }, { orderBy: { position: 'asc', pk: 'asc' } }),
    em.find(FormField, { formId }, { orderBy: { position: 'asc', pk: 'asc' } }),
  ]);
  return { pages: pages.map(toPage), fields: fields.map(toField) };
}

/** The form with its current structure and that structure's version (recorded first if it is not kept). */
export async function formDetailOf(em: Em, form: Form): Promise<FormDetail> {
  const read = await versionOf(em, form, await loadStructure(em, form.id), (tx) => loadStructure(tx, form.id));
  return { form, version: read.version, ...read.structure };
}

export async function getFormDetail(em: Em, organizationId: string, formId: string): Promise<FormDetail | null> {
  const form = await findForm(em, organizationId, formId);
  return form && formDetailOf(em, form);
}

export async function createForm(
  em: Em, organizationId: string, input: FormInput, structure: FormStructure, encryptionKey: Buffer,
): Promise<FormDetail> {
  const now = new Date();
  const form = Object.assign(new Form(), {
    id: newId('form'), organizationId, title: input.title, description: input.description ?? null,
    slug: input.slug ?? null, status: input.status ?? 'draft',
    settings: sealSettings(input.settings ?? {}, null, encryptionKey), translations: input.translations ?? null,
    createdAt: now, updatedAt: now, version: 1,
  });
  await flushGuardingSlug(() => em.transactional(async (tx) => {
    // Pages and fields reference the form by a plain column, so the form row must exist first.
    await tx.persistAndFlush(form);
    structureRows(tx, form.id, structure);
    await keepAsVersion(tx, form, structure, now);
  }));
  return { form, version: 1, ...structure };
}

export async function updateFormMetadata(em: Em, organizationId: string, formId: string, patch: FormPatch): Promise<Form | null> {
  const form = await findForm(em, organizationId, formId);
  if (!form) return null;
  Object.assign(form, patch, { updatedAt: new Date() });
  await flushGuardingSlug(() => em.flush());
  return form;
}

/**
 * Deletes every page and field and inserts the new ones in one transaction: all or nothing. The new
 * structure is the form's next version, kept in the same transaction under the form row's lock, so
 * concurrent replacements get consecutive versions; a current structure that was never kept (the
 * previous release replaced it) is kept first, as the version before.
 * `translations` replace the stored ones; without them, the stored ones are kept where they still
 * name a page, field or option of the new structure.
 */
export async function replaceStructure(
  em: Em, organizationId: string, formId: string, structure: FormStructure,
  settings: Record<string, any> | undefined, encryptionKey: Buffer, translations?: FormTranslations,
): Promise<FormDetail | null> {
  return em.transactional(async (tx) => {
    // PESSIMISTIC_WRITE (`for update`), which waits for a concurrent replacement; the literal 4 this
    // once was is PESSIMISTIC_PARTIAL_WRITE (`skip locked`), which answered that replacement 404.
    const form = await tx.findOne(Form, { id: formId, organizationId, ...LIVE }, { lockMode: LockMode.PESSIMISTIC_WRITE });
    if (!form) return null;
    const now = new Date();
    const before = await keepAsVersion(tx, form, await loadStructure(tx, formId), form.updatedAt);
    await tx.nativeDelete(FormPage, { formId });
    await tx.nativeDelete(FormField, { formId });
    structureRows(tx, formId, structure);
    form.version = await keepAsVersion(tx, { id: formId, organizationId, version: before }, structure, now, { next: true });
    if (settings) form.settings = sealSettings(settings, form.settings, encryptionKey);
    form.translations = translations ?? (form.translations ? keptTranslations(form.translations, structure) : null);
    form.updatedAt = now;
    return { form, version: form.version, ...structure };
  });
}

export async function softDeleteForm(em: Em, organizationId: string, formId: string): Promise<boolean> {
  const now = new Date();
  const affected = await em.nativeUpdate(Form, { id: formId, organizationId, ...LIVE }, { deletedAt: now, updatedAt: now });
  return affected > 0;
}
