import Joi from 'joi';
import type { Server } from 'restify';
import type { AppContext } from '../../app';
import { FORM_STATUSES } from '../../domain/forms/entities';
import {
  createForm, findForm, formDetailOf, getFormDetail, listForms, replaceStructure, SlugTakenError, softDeleteForm,
  updateFormMetadata, type FormInput, type FormPatch,
} from '../../domain/forms/form-service';
import { UnresolvedMaskedToken } from '../../domain/forms/settings';
import { normalizeStructure } from '../../domain/forms/structure';
import { translationErrors, type FormTranslations } from '../../domain/forms/translations';
import type { FormStructure } from '../../domain/forms/types';
import { newId } from '../../lib/ids';
import { errors } from '../errors';
import { authenticated } from '../pipeline';
import { findOrganizationFormVersion, listFormVersions } from '../../domain/forms/store';
import { presentFormDetail, presentFormSummary, presentFormVersion, presentFormVersionItem } from '../presenters/forms';
import { validate } from '../validation';
import { formIdParam, settingsSchema } from './schemas';

const slug = Joi.string().min(1).max(100).pattern(/^[a-z0-9]+(?:-[a-z0-9]+)*$/)
  .message('slug must be lowercase letters, digits and single hyphens').allow(null);
const metadata = {
  title: Joi.string().trim().min(1).max(500),
  description: Joi.string().max(5000).allow('', null),
  slug,
  status: Joi.string().valid(...FORM_STATUSES),
};

const createSchema = Joi.object({
  ...metadata,
  title: metadata.title.required(),
  pages: Joi.array(),
  fields: Joi.array(),
  settings: settingsSchema,
  translations: Joi.any(),
}).required();

const updateSchema = Joi.object(metadata).min(1).required()
  .messages({ 'object.min': 'body must change at least one of title, description, slug, status' });

const structureSchema = Joi.object({
  pages: Joi.array().required(),
  fields: Joi.array().required(),
  settings: settingsSchema,
  translations: Joi.any(),
}).required();

function structureOrFail(pages: unknown, fields: unknown): FormStructure {
  const result = normalizeStructure({ pages: pages ?? [], fields: fields ?? [] }, (prefix) => newId(prefix));
  if (!result.structure) throw errors.validation(result.errors, 'Form structure is invalid');
  return result.structure;
}

/** `translations` checked against the structure they translate (unknown ids, tags outside BCP 47: 400). */
function translationsOrFail(translations: unknown, structure: FormStructure): FormTranslations | undefined {
  if (translations === undefined) return undefined;
  const problems = translationErrors(translations, structure);
  if (problems.length) throw errors.validation(problems, 'Form translations are invalid');
  return translations as FormTranslations;
}

function refusedFormWrite(err: unknown): never {
  if (err instanceof SlugTakenError) throw errors.validation([{ field: 'slug', message: err.message }]);
  if (err instanceof UnresolvedMaskedToken) {
    throw errors.validation([{ field: `settings.integrations[${err.index}].accessToken`, message: err.message }]);
  }
  throw err;
}

const formNotFound = () => errors.notFound('Form not found');

/** Paged like the submissions list. */
const versionsQuerySchema = Joi.object({
  limit: Joi.number().integer().min(1).max(100).default(50),
  offset: Joi.number().integer().min(0).max(2_147_483_647).default(0),
}).unknown(true);

const versionParamSchema = Joi.object({
  version: Joi.number().integer().min(1).max(2_147_483_647).required().label('version'),
}).unknown(true);

export function registerFormRoutes(server: Server, app: AppContext): void {
  server.get('/v1/forms', authenticated(app, 'forms:read', async ({ em, organizationId }) => {
    const forms = await listForms(em, organizationId);
    return { status: 200, body: { forms: forms.map(presentFormSummary) } };
  }));

  server.post('/v1/forms', authenticated(app, 'forms:write', async ({ em, organizationId, json }) => {
    const input = validate<Omit<FormInput, 'translations'> & { pages?: unknown[]; fields?: unknown[]; translations?: unknown }>(createSchema, json());
    const structure = structureOrFail(input.pages, input.fields);
    const translations = translationsOrFail(input.translations, structure);
    const detail = await createForm(em, organizationId, { ...input, translations }, structure, app.encryptionKey).catch(refusedFormWrite);
    return { status: 201, body: { form: presentFormDetail(detail) } };
  }));

  server.get(`/v1/forms/:formId`, authenticated(app, 'forms:read', async ({ em, organizationId, req }) => {
    const formId = formIdParam(req);
    const detail = formId && (await getFormDetail(em, organizationId, formId));
    if (!detail) throw formNotFound();
    return { status: 200, body: { form: presentFormDetail(detail) } };
  }));

  server.put(`/v1/forms/:formId`, authenticated(app, 'forms:write', async ({ em, organizationId, req, json }) => {
    const body = json();
    const formId = formIdParam(req);
    if (!formId || !(await findForm(em, organizationId, formId))) throw formNotFound();
    const patch = validate<FormPatch>(updateSchema, body);
    const form = await updateFormMetadata(em, organizationId, formId, patch).catch(refusedFormWrite);
    if (!form) throw formNotFound();
    app.forgetForm(formId);
    return { status: 200, body: { form: presentFormDetail(await formDetailOf(em, form)) } };
  }));

  server.put(`/v1/forms/:formId/structure`, authenticated(app, 'forms:write', async ({ em, organizationId, req, json }) => {
    const body = json();
    const formId = formIdParam(req);
    if (!formId || !(await findForm(em, organizationId, formId))) throw formNotFound();
    const input = validate<{ pages: unknown[]; fields: unknown[]; settings?: Record<string, any>; translations?: unknown }>(structureSchema, body);
    const structure = structureOrFail(input.pages, input.fields);
    const translations = translationsOrFail(input.translations, structure);
    const detail = await replaceStructure(em.fork(), organizationId, formId, structure, input.settings, app.encryptionKey, translations)
      .catch(refusedFormWrite);
    if (!detail) throw formNotFound();
    app.forgetForm(formId);
    return { status: 200, body: { form: presentFormDetail(detail) } };
  }));

  server.get(`/v1/forms/:formId/versions`, authenticated(app, 'forms:read', async ({ em, organizationId, req }) => {
    const formId = formIdParam(req);
    const form = formId && (await findForm(em, organizationId, formId));
    if (!form) throw formNotFound();
    const query = validate<{ limit: number; offset: number }>(versionsQuerySchema, req.query ?? {});
    await formDetailOf(em, form); // the current structure is kept as a version before versions are listed
    const { items, total } = await listFormVersions(em, organizationId, form.id, query);
    return {
      status: 200,
      body: { versions: items.map(presentFormVersionItem), pagination: { limit: query.limit, offset: query.offset, total } },
    };
  }));

  server.get(`/v1/forms/:formId/versions/:version`, authenticated(app, 'forms:read', async ({ em, organizationId, req }) => {
    const formId = formIdParam(req);
    const form = formId && (await findForm(em, organizationId, formId));
    if (!form) throw formNotFound();
    const { version } = validate<{ version: number }>(versionParamSchema, { version: req.params?.version });
    await formDetailOf(em, form);
    const kept = await findOrganizationFormVersion(em, organizationId, form.id, version);
    if (!kept) throw errors.notFound('Form version not found');
    return { status: 200, body: { version: presentFormVersion(kept) } };
  }));

  server.del(`/v1/forms/:formId`, authenticated(app, 'forms:write', async ({ em, organizationId, req }) => {
    const formId = formIdParam(req);
    if (!formId || !(await softDeleteForm(em, organizationId, formId))) throw formNotFound();
    app.forgetForm(formId);
    return { status: 204 };
  }));
}

