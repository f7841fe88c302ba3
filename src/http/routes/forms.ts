import Joi from 'joi';
import type { Server } from 'restify';
import type { AppContext } from '../../app';
import { FORM_STATUSES } from '../../domain/forms/entities';
import {
  createForm, findForm, getFormDetail, listForms, loadStructure, replaceStructure, SlugTakenError, softDeleteForm,
  updateFormMetadata, type FormInput, type FormPatch,
} from '../../domain/forms/form-service';
import { UnresolvedMaskedToken } from '../../domain/forms/settings';
import { normalizeStructure } from '../../domain/forms/structure';
import { translationErrors, type FormTranslations } from '../../domain/forms/translations';
import type { FormStructure } from '../../domain/forms/types';
import { newId } from '../../lib/ids';
import { errors } from '../errors';
import { authenticated } from '../pipeline';
import { presentFormDetail, presentFormSummary } from '../presenters/forms';
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
    return { status: 200, body: { form: presentFormDetail({ form, ...(await loadStructure(em, formId)) }) } };
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

  server.del(`/v1/forms/:formId`, authenticated(app, 'forms:write', async ({ em, organizationId, req }) => {
    const formId = formIdParam(req);
    if (!formId || !(await softDeleteForm(em, organizationId, formId))) throw formNotFound();
    app.forgetForm(formId);
    return { status: 204 };
  }));
}

