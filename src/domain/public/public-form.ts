// The sanitized form the public runtime hands to browsers (the PublicForm schema of openapi.yaml): no
// organization id, integration settings, webhook data or internal settings.
// Built from an allowlist: nothing of the organization, integrations, webhooks or other settings
// can reach a browser unless it is named here.
import type { CachedForm } from '../forms/form-cache';
import type { Field, Page } from '../forms/types';
import type { PublicBotProtection, PublicFormJson, PublicFormSettings, PublicPage, PublicTheme } from './types';
import { isPlainObject } from '../../lib/objects';
import { fileLimits } from '../files/rules';
import { translatedSettingsTexts, translateField, translatePage, translationFor, type FormTranslation } from '../forms/translations';
import { CATALOGUES, DEFAULT_LANGUAGE, type Language } from './messages';

/**
 * Field config keys the hosted page reads to render a field and the shared validator reads to check
 * it; `sensitive` tells the page never to copy the field into submitterName / submitterEmail.
 */
const PUBLIC_CONFIG_KEYS = [
  'options', 'maxLength', 'min', 'max', 'minLabel', 'maxLabel', 'format', 'accept', 'maxSize', 'maxFiles', 'amount', 'currency', 'layout', 'sensitive',
] as const;

/** validationRules keys the shared validator reads. */
const PUBLIC_RULE_KEYS = ['required', 'minLength', 'maxLength', 'pattern', 'min', 'max'] as const;

export const DEFAULT_SUBMIT_BUTTON_TEXT = 'Submit';
export const DEFAULT_SUCCESS_MESSAGE = 'Thank you!';

export interface PublicFormOptions {
  /** TURNSTILE_SITE_KEY; a form with protection on still names the challenge when it is unset. */
  siteKey: string | null;
  analyticsToken: string;
  /** STRIPE_PUBLISHABLE_KEY when payments are enabled (both Stripe keys set); null otherwise. */
  publishableKey?: string | null;
  /** UPLOAD_MAX_BYTES: a file-upload field's maxSize is shown as the limit uploads really get. */
  uploadMaxBytes?: number;
  /** The language to answer in (language.ts resolves it): the form's translation, per text, and the default words. */
  language?: Language;
  /** The tag asked for in that language (language.ts requestedTag): its translation first, e.g. `pt-BR` before `pt-PT`. */
  languageTag?: string | null;
}

type Settings = Record<string, unknown>;

function pick(source: Record<string, unknown> | null | undefined, keys: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    if (source && Object.prototype.hasOwnProperty.call(source, key) && source[key] !== undefined) out[key] = source[key];
  }
  return out;
}

function nonEmptyString(value: unknown): string | null {
  return typeof value === 'string' && value.trim() !== '' ? value : null;
}

export function publicSettings(settings: Settings, language: Language = DEFAULT_LANGUAGE, translation: FormTranslation | null = null): PublicFormSettings {
  const words = CATALOGUES[language];
  const own = translatedSettingsTexts({
    submitButtonText: nonEmptyString(settings.submitButtonText), successMessage: nonEmptyString(settings.successMessage),
  }, translation);
  return {
    redirectUrl: nonEmptyString(settings.redirectUrl),
    submitButtonText: own.submitButtonText ?? (language === DEFAULT_LANGUAGE ? DEFAULT_SUBMIT_BUTTON_TEXT : words.submit),
    successMessage: own.successMessage ?? (language === DEFAULT_LANGUAGE ? DEFAULT_SUCCESS_MESSAGE : words.thankYou),
  };
}

export function botProtectionEnabled(settings: Settings): boolean {
  return isPlainObject(settings.botProtection) && settings.botProtection.enabled === true;
}

function publicBotProtection(settings: Settings, siteKey: string | null): PublicBotProtection | null {
  if (!botProtectionEnabled(settings)) return null;
  return { provider: 'turnstile', siteKey: siteKey ?? '', mode: 'invisible', offlineQueueEnabled: false };
}

function publicTheme(settings: Settings): PublicTheme | null {
  const theme = settings.theme;
  if (!isPlainObject(theme)) return null;
  return {
    preset: nonEmptyString(theme.preset),
    tokens: isPlainObject(theme.tokens) ? { ...theme.tokens } : {},
  };
}

export function publicField(field: Field): Field {
  return {
    id: field.id,
    type: field.type,
    label: field.label,
    placeholder: field.placeholder ?? null,
    description: field.description ?? null,
    required: field.required,
    config: pick(field.config, PUBLIC_CONFIG_KEYS),
    validationRules: pick(field.validationRules, PUBLIC_RULE_KEYS),
    order: field.order,
    pageId: field.pageId ?? null,
    conditionalLogic: field.conditionalLogic ?? null,
    hidden: field.hidden ?? false,
    ...(field.prefillParam ? { prefillParam: field.prefillParam } : {}),
  };
}

function publicPage(page: Page, fields: Field[]): PublicPage {
  return {
    id: page.id,
    title: page.title,
    description: page.description ?? null,
    order: page.order,
    conditionalLogic: page.conditionalLogic ?? null,
    fields: fields.filter((field) => field.pageId === page.id),
  };
}

export function buildPublicForm(form: CachedForm, options: PublicFormOptions): PublicFormJson {
  const settings: Settings = isPlainObject(form.settings) ? form.settings : {};
  const language = options.language ?? DEFAULT_LANGUAGE;
  const translation = translationFor(form.translations, language, options.languageTag ?? null);
  const fields = form.structure.fields.map((source) => {
    const field = translateField(publicField(source), translation);
    // The page names the limit before anything is sent: the field's own, or the server's if lower (or unset).
    if (field.type === 'file-upload' && options.uploadMaxBytes) {
      field.config = { ...field.config, maxSize: fileLimits(source, options.uploadMaxBytes).maxSize };
    }
    return field;
  });
  const title = translation?.title?.trim() ? translation.title : form.title;
  const description = translation?.description?.trim() ? translation.description : form.description ?? null;
  return {
    id: form.id,
    language,
    title,
    description,
    version: form.version,
    settings: publicSettings(settings, language, translation),
    botProtection: publicBotProtection(settings, options.siteKey),
    payments: options.publishableKey && fields.some((field) => field.type === 'payment')
      ? { provider: 'stripe', publishableKey: options.publishableKey }
      : null,
    telemetry: { analyticsToken: options.analyticsToken },
    theme: publicTheme(settings),
    fields,
    pages: form.structure.pages.map((page) => publicPage(translatePage(page, translation), fields)),
  };
}
