// Payment fields on the hosted page: Stripe's Payment Element takes the card in the form. The page
// asks the service for a PaymentIntent per payment field, mounts the element with its client
// secret, and on submit checks the answers (POST /check), confirms the payment, and only then
// submits with the intent id. Before a redirect (3-D Secure, bank pages) the answers are kept in
// sessionStorage; back at return_url they are restored and submitted once.
// Uses only Stripe.js's documented surface: Stripe(pk), elements({clientSecret}), create('payment'),
// mount, on('change'|'ready'), confirmPayment, retrievePaymentIntent.
import type { Field } from '../../domain/forms/types';
import type { PublicFormJson } from '../../domain/public/types';
import { createPaymentIntent, postCheck, type CheckOutcome, type SubmissionBody } from './api';
import { domId, h, scriptGlobal } from './dom';
import type { FieldControl } from './fields';
import { describedBy, errorSlot, FieldHooks, helpText, requiredMark } from './frame';
import { language, t } from './i18n';
import { formatAmount } from './values';

interface StripeError { type?: string; code?: string; message?: string }
interface StripeIntent { id: string; status: string; last_payment_error?: StripeError | null }
interface StripeElement {
  mount(target: HTMLElement): void;
  on(event: 'change' | 'ready', handler: (event: { complete?: boolean; empty?: boolean }) => void): void;
  focus?(): void;
}
interface StripeElements { create(type: 'payment', options?: Record<string, unknown>): StripeElement }
interface StripeClient {
  elements(options: { clientSecret: string; appearance?: Record<string, unknown>; locale?: string }): StripeElements;
  confirmPayment(options: {
    elements: StripeElements; redirect: 'if_required'; confirmParams: { return_url: string };
  }): Promise<{ error?: StripeError; paymentIntent?: StripeIntent }>;
  retrievePaymentIntent(clientSecret: string): Promise<{ error?: StripeError; paymentIntent?: StripeIntent }>;
}

declare global {
  interface Window { Stripe?: (publishableKey: string) => StripeClient }
}

const SCRIPT_ID = 'fs-stripe-script';
const LOAD_TIMEOUT_MS = 15000;
const UNAVAILABLE = 'paymentUnavailable';
const NOT_COMPLETED = 'paymentNotCompleted';
const PROCESSING = 'paymentProcessing';
/** Kept answers older than this are not restored: the person has moved on. */
const KEPT_FOR_MS = 60 * 60 * 1000;

function loadStripe(): Promise<(publishableKey: string) => StripeClient> {
  return scriptGlobal(SCRIPT_ID, () => window.Stripe, 'Stripe.js', LOAD_TIMEOUT_MS);
}

/** What is kept across a redirect: the answers, and which intent they wait on. */
interface KeptAnswers {
  body: SubmissionBody;
  fieldId: string;
  paymentIntentId: string;
  keptAt: number;
}

/** Back from a redirect: the answers to restore and submit, and the intent Stripe came back with. */
export interface Resumed {
  body: SubmissionBody;
  /** The payment went through: submit the answers without asking again. */
  paid: boolean;
}

interface Slot {
  field: Field;
  control: FieldControl;
  intent: { paymentIntentId: string; clientSecret: string } | null;
  elements: StripeElements | null;
  element: StripeElement | null;
  paid: boolean;
  /** Settles once the element is mounted, or setting it up has failed. */
  ready: Promise<void>;
  problem: string | null;
}

export type PayOutcome =
  | { kind: 'paid' }
  /** The answers were refused before anyone was charged (the /check answer). */
  | { kind: 'refused'; outcome: Exclude<CheckOutcome, { kind: 'success' }> }
  /** The payment did not go through; its message is shown beside the field. */
  | { kind: 'declined'; control: FieldControl };

function storage(): Storage | null {
  try {
    return window.sessionStorage;
  } catch {
    return null;
  }
}

export class PaymentFields {
  private readonly stripe: Promise<StripeClient>;
  private readonly slots = new Map<string, Slot>();
  private readonly keyName: string;
  /** Set when this load is the return from a redirect that the kept answers wait on. */
  private readonly returning: { kept: KeptAnswers; clientSecret: string } | null;

  constructor(private readonly form: PublicFormJson, publishableKey: string) {
    this.keyName = `fs-payment:${form.id}`;
    this.stripe = loadStripe().then((factory) => factory(publishableKey));
    this.stripe.catch(() => undefined);
    this.returning = this.readReturn();
  }

  /** Where Stripe sends the person back after a redirect: this page, without Stripe's parameters. */
  private returnUrl(): string {
    const url = new URL(window.location.href);
    for (const name of ['payment_intent', 'payment_intent_client_secret', 'redirect_status']) url.searchParams.delete(name);
    url.hash = '';
    return url.toString();
  }

  private readReturn(): { kept: KeptAnswers; clientSecret: string } | null {
    const params = new URLSearchParams(window.location.search);
    const intentId = params.get('payment_intent');
    const clientSecret = params.get('payment_intent_client_secret');
    if (!intentId || !clientSecret) return null;
    // Stripe's parameters are not kept in the address: a reload must not act on them again.
    window.history.replaceState(window.history.state, '', this.returnUrl());
    const store = storage();
    const raw = store?.getItem(this.keyName);
    store?.removeItem(this.keyName);
    try {
      const kept = raw ? JSON.parse(raw) as KeptAnswers : null;
      if (!kept || kept.paymentIntentId !== intentId || !clientSecret.startsWith(`${intentId}_secret_`)) return null;
      if (Date.now() - kept.keptAt > KEPT_FOR_MS) return null;
      return { kept, clientSecret };
    } catch {
      return null;
    }
  }

  /** The control of a payment field: the amount, Stripe's Payment Element, the error slot. */
  createControl(field: Field, on: FieldHooks): FieldControl {
    const amount = formatAmount(field.config.amount, field.config.currency);
    const labelId = domId(field.id, 'label');
    const amountId = domId(field.id, 'amount');
    const mountPoint = h('div', { class: 'fs-payment-element', role: 'group', 'aria-labelledby': labelId, 'aria-describedby': describedBy(field, amountId) });
    const status = h('p', { class: 'fs-payment-status', 'aria-live': 'polite' }, t('paymentLoading'));
    const error = errorSlot(field);
    const element = h('div', { class: `fs-field fs-field--payment`, 'data-field-id': field.id },
      h('div', { class: 'fs-label', id: labelId }, field.label, ...requiredMark(field, true)),
      helpText(field),
      amount ? h('p', { class: 'fs-payment-amount', id: amountId }, t('amountDue', { amount })) : null,
      mountPoint,
      status,
      error);

    const slot: Slot = {
      field, control: null as unknown as FieldControl, intent: null, elements: null, element: null, paid: false, ready: Promise.resolve(), problem: null,
    };
    const setError = (message: string | null) => {
      const shown = message && slot.problem ? slot.problem : message;
      error.textContent = shown ?? '';
      element.classList.toggle('fs-invalid', !!shown);
    };
    slot.control = {
      field,
      element,
      value: () => slot.intent?.paymentIntentId,
      setValue: () => undefined,
      setError,
      focus: () => {
        if (slot.element?.focus) slot.element.focus();
        mountPoint.scrollIntoView({ block: 'center' });
      },
      settled: () => slot.ready,
    };
    let started = false;
    const start = () => {
      if (started) return;
      started = true;
      slot.ready = this.mount(slot, mountPoint, status, on).catch(() => {
        slot.problem = t(UNAVAILABLE);
        status.textContent = '';
        setError(t(UNAVAILABLE));
      });
    };
    this.slots.set(field.id, slot);
    // The intent is made when the field comes into view, not for every visitor who opens the page
    // (nor for a payment on a later page or behind a condition never met).
    if (this.returning?.kept.fieldId === field.id || typeof IntersectionObserver !== 'function') start();
    else {
      const observer = new IntersectionObserver((entries) => {
        if (!entries.some((entry) => entry.isIntersecting)) return;
        observer.disconnect();
        start();
      }, { rootMargin: '400px 0px' });
      observer.observe(mountPoint);
    }
    return slot.control;
  }

  private async mount(slot: Slot, mountPoint: HTMLElement, status: HTMLElement, on: FieldHooks): Promise<void> {
    const returning = this.returning?.kept.fieldId === slot.field.id ? this.returning : null;
    const intent = returning
      ? { paymentIntentId: returning.kept.paymentIntentId, clientSecret: returning.clientSecret }
      : await createPaymentIntent(this.form.id, slot.field.id);
    if (!intent) throw new Error('no payment intent');
    const stripe = await this.stripe;
    slot.intent = intent;
    slot.elements = stripe.elements({ clientSecret: intent.clientSecret, appearance: appearance(), locale: language() });
    slot.element = slot.elements.create('payment');
    slot.element.on('ready', () => { status.textContent = ''; });
    slot.element.on('change', (event) => {
      if (!event.empty) on.changed(slot.field);
      // A message from an earlier attempt goes once the person changes the payment details.
      slot.control.setError(null);
    });
    slot.element.mount(mountPoint);
  }

  /** The answers kept before a redirect, when this load is the return from it and the payment went through. */
  async resume(): Promise<Resumed | null> {
    if (!this.returning) return null;
    const slot = this.slots.get(this.returning.kept.fieldId);
    if (!slot) return null;
    await slot.ready;
    const stripe = await this.stripe.catch(() => null);
    const answer = stripe ? await stripe.retrievePaymentIntent(this.returning.clientSecret).catch(() => null) : null;
    const intent = answer && answer.paymentIntent;
    if (intent && intent.status === 'succeeded') slot.paid = true;
    else {
      const message = intent && intent.status === 'processing' ? t(PROCESSING)
        : (intent && intent.last_payment_error && intent.last_payment_error.message) || t(NOT_COMPLETED);
      slot.control.setError(message);
    }
    return { body: this.returning.kept.body, paid: slot.paid };
  }

  /**
   * Before the submission: checks the answers, then confirms each shown, unpaid payment. A redirect
   * (3-D Secure) leaves the page here; the answers wait in sessionStorage for the return.
   */
  async pay(body: SubmissionBody, shown: Set<string>): Promise<PayOutcome> {
    const due = [...this.slots.values()].filter((slot) => shown.has(slot.field.id) && slot.intent && !slot.paid);
    if (!due.length) return { kind: 'paid' };
    const check = await postCheck(this.form.id, body);
    if (check.kind !== 'success') return { kind: 'refused', outcome: check };
    const stripe = await this.stripe;
    for (const slot of due) {
      this.keep(body, slot);
      const result = await stripe.confirmPayment({
        elements: slot.elements!, redirect: 'if_required', confirmParams: { return_url: this.returnUrl() },
      }).catch((): { error?: StripeError; paymentIntent?: StripeIntent } => ({ error: { message: t(NOT_COMPLETED) } }));
      storage()?.removeItem(this.keyName);
      // The payment may have gone through though its answer was lost: Stripe has the last word.
      const intent = result.paymentIntent || (result.error && result.error.type !== 'card_error' && result.error.type !== 'validation_error'
        ? await this.latest(stripe, slot) : undefined);
      if (!intent || intent.status !== 'succeeded') {
        const message = (result.error && result.error.message) || (intent && intent.status === 'processing' ? t(PROCESSING) : t(NOT_COMPLETED));
        slot.control.setError(message);
        return { kind: 'declined', control: slot.control };
      }
      slot.paid = true;
    }
    return { kind: 'paid' };
  }

  private async latest(stripe: StripeClient, slot: Slot): Promise<StripeIntent | undefined> {
    const answer = await stripe.retrievePaymentIntent(slot.intent!.clientSecret).catch(() => null);
    return answer && answer.paymentIntent && answer.paymentIntent.status === 'succeeded' ? answer.paymentIntent : undefined;
  }

  private keep(body: SubmissionBody, slot: Slot): void {
    const { captchaToken: _token, ...answers } = body;
    const kept: KeptAnswers = { body: answers, fieldId: slot.field.id, paymentIntentId: slot.intent!.paymentIntentId, keptAt: Date.now() };
    try {
      storage()?.setItem(this.keyName, JSON.stringify(kept));
    } catch {
      // Storage full or refused: a redirect would lose the answers, but a payment without one still works.
    }
  }
}

/** The element follows the page's theme where Stripe's Appearance API lets it. */
function appearance(): Record<string, unknown> {
  const style = getComputedStyle(document.documentElement);
  const variables: Record<string, string> = {};
  for (const [name, property] of [['colorPrimary', '--fs-primary'], ['colorText', '--fs-text'], ['colorDanger', '--fs-error'], ['borderRadius', '--fs-radius']]) {
    const value = style.getPropertyValue(property).trim();
    if (value) variables[name] = value;
  }
  return { theme: document.documentElement.dataset.theme === 'dark' ? 'night' : 'stripe', variables };
}
