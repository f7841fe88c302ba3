// The public form as the runtime hands it to browsers (the PublicForm schema of openapi.yaml).
import type { Field, Page } from '../forms/types';

export interface PublicFormSettings {
  redirectUrl: string | null;
  submitButtonText: string;
  successMessage: string;
}

export interface PublicBotProtection {
  provider: 'turnstile';
  siteKey: string;
  mode: 'invisible';
  offlineQueueEnabled: false;
}

export interface PublicPayments {
  provider: 'stripe';
  publishableKey: string;
}

export interface PublicTheme {
  preset: string | null;
  tokens: Record<string, unknown>;
}

export type PublicPage = Page & { fields: Field[] };

export interface PublicFormJson {
  id: string;
  /** The language its texts and the page's words are in (README.md "Languages"). */
  language: string;
  title: string;
  description: string | null;
  /** The structure's version: sent back as `formVersion` with the answers. */
  version: number;
  settings: PublicFormSettings;
  botProtection: PublicBotProtection | null;
  /** Non-null when the form has a payment field and the service takes payments (Stripe keys set). */
  payments: PublicPayments | null;
  telemetry: { analyticsToken: string };
  theme: PublicTheme | null;
  fields: Field[];
  pages: PublicPage[];
}
