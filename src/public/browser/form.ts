// The hosted form page: renders the public form embedded in the HTML, runs the shared conditional
// logic and validation live, walks multi-page forms, and submits to the public runtime.
import { visibleFieldIds } from '../../domain/forms/logic';
import type { Field, FormStructure } from '../../domain/forms/types';
import { validateSubmission } from '../../domain/submissions/validate';
import type { PublicFormJson } from '../../domain/public/types';
import { AnalyticsEvent, postSubmission, sendEvent, SubmissionBody } from './api';
import { h, visuallyHidden } from './dom';
import { clearDraft, loadDraft, saveDraft } from './draft';
import { PagesReached } from './drop-off';
import { createControl, FieldControl } from './fields';
import { PaymentFields } from './payment';
import { connectToHost, HostBridge } from './host';
import { Challenge, createChallenge } from './turnstile';
import { language, problemText, t, useLanguage } from './i18n';
import { failureMessage, formChangedNotice, prefillValue, requiredMessage, safeRedirectUrl, submitterDetails } from './values';

interface PageView {
  fields: Field[];
  section: HTMLElement;
  heading: HTMLElement | null;
}

/** The public body limit is 1 MB; keep room for the challenge token. */
const BODY_LIMIT = 1024 * 1024 - 8 * 1024;

function byOrder<T extends { order: number }>(items: T[]): T[] {
  return [...items].sort((a, b) => a.order - b.order);
}

/** Fields grouped by page, in order; fields without a known page join the first page. */
function layoutPages(form: PublicFormJson): Array<{ title: string; description: string | null; fields: Field[] }> {
  const pages = byOrder(form.pages);
  const fields = byOrder(form.fields);
  if (!pages.length) return [{ title: '', description: null, fields }];
  const known = new Set(pages.map((page) => page.id));
  return pages.map((page, index) => ({
    title: page.title,
    description: page.description,
    fields: fields.filter((field) => field.pageId === page.id || (index === 0 && !known.has(field.pageId ?? ''))),
  }));
}

class HostedForm {
  private readonly structure: FormStructure;
  private readonly controls = new Map<string, FieldControl>();
  private readonly pages: PageView[];
  private readonly card: HTMLElement;
  private readonly formElement: HTMLFormElement;
  private readonly progress: HTMLElement;
  private readonly progressBar: HTMLElement;
  private readonly progressFill: HTMLElement;
  private readonly progressText: HTMLElement;
  private readonly alert: HTMLElement;
  private readonly status: HTMLElement;
  private readonly back: HTMLButtonElement;
  private readonly next: HTMLButtonElement;
  private readonly success: HTMLElement;
  /** Says that answers kept from an earlier visit were put back, with "Start over". */
  private readonly draftNotice: HTMLElement;
  /** Each control's value before anything was filled in: what "Start over" puts back. */
  private readonly blank = new Map<string, unknown>();
  private readonly challenge: Challenge | null;
  private readonly payments: PaymentFields | null;
  private visible = new Set<string>();
  private readonly edited = new Set<string>();
  private current = 0;
  private started = false;
  private busy = false;
  /** The page holds answers of this person worth keeping in the browser (draft.ts). */
  private dirty = false;
  private submitted = false;
  private readonly pagesReached: PagesReached;

  /** `carried`: the answers and notice of a page whose form changed under it (409 form_changed), shown again on the new version. */
  constructor(private readonly form: PublicFormJson, private readonly root: HTMLElement, private readonly host: HostBridge | null,
    carried: { values: Record<string, unknown>; notice: string } | null = null) {
    this.structure = { pages: form.pages, fields: form.fields };
    this.pagesReached = new PagesReached(form);
    const layout = layoutPages(form);
    const multiPage = layout.length > 1;
    const hooks = { changed: (field: Field) => this.changed(field), left: (field: Field) => this.left(field) };
    this.payments = form.payments ? new PaymentFields(form, form.payments.publishableKey) : null;

    this.pages = layout.map((page, index) => {
      const heading = multiPage
        ? h('h2', { class: 'fs-page-title', tabindex: -1 }, page.title || t('pageNumber', { n: index + 1 }))
        : null;
      const section = h('section', { class: 'fs-page' }, heading,
        page.description ? h('p', { class: 'fs-page-description' }, page.description) : null);
      for (const field of page.fields) {
        const control = field.type === 'payment' && this.payments && !field.hidden
          ? this.payments.createControl(field, hooks)
          : createControl(field, hooks, { formId: form.id, headingLevel: multiPage ? 3 : 2 });
        this.controls.set(field.id, control);
        if (control.element) section.appendChild(control.element);
      }
      return { fields: page.fields, section, heading };
    });

    this.progressText = h('span', { class: 'fs-progress-text', id: 'fs-progress-text' });
    this.progressFill = h('span', { class: 'fs-progress-fill' });
    this.progressBar = h('div', { class: 'fs-progress-track', role: 'progressbar', 'aria-labelledby': 'fs-progress-text', 'aria-valuemin': 1 },
      this.progressFill);
    this.progress = h('div', { class: 'fs-progress', hidden: !multiPage }, this.progressText, this.progressBar);
    this.alert = h('div', { class: 'fs-alert', role: 'alert' });
    this.status = h('p', { class: 'fs-status', role: 'status' });
    this.back = h('button', { type: 'button', class: 'fs-button fs-button--secondary' }, t('back'));
    this.next = h('button', { type: 'submit', class: 'fs-button fs-button--primary' }, t('next'));
    const challengeSlot = h('div', { class: 'fs-challenge' });
    const startOver = h('button', { type: 'button', class: 'fs-button fs-button--small fs-button--secondary' }, t('startOver'));
    this.draftNotice = h('div', { class: 'fs-draft', hidden: true },
      h('p', { class: 'fs-draft-text' }, t('draftRestored')), startOver);
    const anyRequired = form.fields.some((field) => field.required && !field.hidden && field.type !== 'heading');
    this.formElement = h('form', { class: 'fs-form', novalidate: true, 'aria-labelledby': 'fs-title' },
      this.draftNotice,
      anyRequired ? requiredNote() : null,
      ...this.pages.map((page) => page.section),
      challengeSlot,
      this.alert,
      this.status,
      h('div', { class: 'fs-actions' }, this.back, this.next));
    this.success = h('div', { class: 'fs-success', role: 'status', tabindex: -1, hidden: true });
    this.card = h('div', { class: 'fs-card' },
      h('header', { class: 'fs-header' },
        h('h1', { class: 'fs-title', id: 'fs-title' }, form.title),
        form.description ? h('p', { class: 'fs-description' }, form.description) : null),
      this.progress,
      this.formElement,
      this.success);
    root.replaceChildren(this.card);

    this.challenge = form.botProtection ? createChallenge(challengeSlot, form.botProtection.siteKey) : null;
    this.back.addEventListener('click', () => this.goBack());
    startOver.addEventListener('click', () => this.startOver());
    this.formElement.addEventListener('submit', (event) => {
      event.preventDefault();
      void this.advance();
    });
    for (const [id, control] of this.controls) this.blank.set(id, this.keptValue(control));
    this.prefill(new URLSearchParams(window.location.search));
    if (carried) {
      this.carry(carried.values, carried.notice);
      return;
    }
    this.restoreDraft();
    this.refresh();
    this.track('view');
    this.pagesReached.reached(this.current);
    this.payments?.resume().then((resumed) => resumed && this.resume(resumed.body.values, resumed.paid), () => undefined);
  }

  /** Back from a payment redirect: the answers kept before it, submitted once if the payment went through. */
  private resume(values: Record<string, unknown>, paid: boolean): void {
    for (const [id, value] of Object.entries(values)) this.controls.get(id)?.setValue(value);
    this.refresh();
    if (paid) void this.submit();
  }

  private keptValue(control: FieldControl): unknown {
    return control.kept ? control.kept() : control.value();
  }

  private putBack(control: FieldControl, value: unknown): void {
    if (control.restore) control.restore(value);
    else control.setValue(value);
  }

  /** The answers kept from an earlier visit of this browser, and the page it reached. */
  private restoreDraft(): void {
    const draft = loadDraft(this.form.id, this.form.fields, this.pages.length);
    if (!draft) return;
    for (const [id, value] of Object.entries(draft.values)) {
      const control = this.controls.get(id);
      if (control) this.putBack(control, value);
    }
    this.dirty = true;
    this.started = true;
    this.draftNotice.hidden = false;
    this.refresh();
    if (draft.page > 0 && this.pageShown(draft.page)) this.goTo(draft.page);
  }

  private keepDraft(): void {
    if (!this.dirty || this.submitted) return;
    const values: Record<string, unknown> = {};
    for (const [id, control] of this.controls) values[id] = this.keptValue(control);
    saveDraft(this.form.id, this.form.fields, values, this.current);
  }

  /** "Start over": the kept answers are forgotten and the page is as first opened. */
  private startOver(): void {
    if (this.busy) return;
    clearDraft(this.form.id);
    this.dirty = false;
    this.edited.clear();
    for (const [id, control] of this.controls) {
      if (!control.element) continue;
      this.putBack(control, this.blank.get(id));
      control.setError(null);
    }
    this.prefill(new URLSearchParams(window.location.search));
    this.draftNotice.hidden = true;
    this.refresh();
    this.goTo(0);
    if (!this.pages[0].heading) this.firstControl()?.focus();
  }

  private firstControl(): FieldControl | undefined {
    return this.pages[this.current].fields
      .map((field) => this.controls.get(field.id))
      .find((control) => control?.element && !control.element.hidden && control.field.type !== 'heading');
  }

  /** Keeps every answer whose question the new version still has, and says what changed. */
  private carry(values: Record<string, unknown>, notice: string): void {
    this.started = true;
    for (const [id, value] of Object.entries(values)) {
      try {
        this.controls.get(id)?.setValue(value);
      } catch {
        // A question whose kind changed starts empty.
      }
    }
    this.refresh();
    this.setAlert(notice);
  }

  /** 409 form_changed: the page becomes the new version, keeping the answers it can. */
  private formChanged(form: PublicFormJson): void {
    const notice = formChangedNotice(this.form.fields, form.fields);
    this.challenge?.reset();
    new HostedForm(form, this.root, this.host, { values: this.values(), notice });
  }

  private prefill(params: URLSearchParams): void {
    for (const field of this.form.fields) {
      if (!field.prefillParam || !params.has(field.prefillParam)) continue;
      const value = prefillValue(field, params.getAll(field.prefillParam));
      if (value !== undefined) this.controls.get(field.id)?.setValue(value);
    }
  }

  private track(type: AnalyticsEvent): void {
    const token = this.form.telemetry && this.form.telemetry.analyticsToken;
    if (token) sendEvent(this.form.id, token, type);
  }

  private values(): Record<string, unknown> {
    const values: Record<string, unknown> = {};
    for (const [id, control] of this.controls) {
      const value = control.value();
      if (value !== undefined) values[id] = value;
    }
    return values;
  }

  /** Current problems per field id, worded for people; fields hidden by logic have none. */
  private problems(): Map<string, string> {
    const check = validateSubmission(this.structure, this.values());
    const problems = new Map<string, string>();
    for (const field of check.missingRequired) {
      if (!this.controls.get(field.id)?.busy?.()) problems.set(field.id, requiredMessage(field));
    }
    for (const error of check.errors) problems.set(error.field, problemText(error.message));
    for (const [id, control] of this.controls) {
      const own = this.visible.has(id) ? control.problem?.() : null;
      if (own) problems.set(id, own);
    }
    return problems;
  }

  private changed(field: Field): void {
    this.edited.add(field.id);
    if (!this.started) {
      this.started = true;
      this.track('start');
    }
    this.dirty = true;
    this.refresh();
    this.keepDraft();
    const control = this.controls.get(field.id);
    // Once a field shows an error, it is re-checked as the person types, so the error goes as soon as it is fixed.
    if (control?.element?.classList.contains('fs-invalid')) control.setError(this.problems().get(field.id) ?? null);
  }

  /** A field is checked when left only once the person has changed it: tabbing past is not an error. */
  private left(field: Field): void {
    const control = this.controls.get(field.id);
    if (!control || this.busy || !this.edited.has(field.id)) return;
    control.setError(this.problems().get(field.id) ?? null);
  }

  private refresh(): void {
    this.visible = visibleFieldIds(this.structure, this.values());
    for (const control of this.controls.values()) {
      const element = control.element;
      if (!element) continue;
      const shown = this.visible.has(control.field.id);
      if (element.hidden !== shown) continue;
      element.hidden = !shown;
      if (!shown) control.setError(null);
    }
    this.updateNavigation();
  }

  private pageShown(index: number): boolean {
    return this.pages[index].fields.some((field) => !field.hidden && this.visible.has(field.id));
  }

  /** The nearest page in `direction` that has something to show, or -1. */
  private step(direction: 1 | -1): number {
    for (let i = this.current + direction; i >= 0 && i < this.pages.length; i += direction) {
      if (this.pageShown(i)) return i;
    }
    return -1;
  }

  private updateNavigation(): void {
    this.pages.forEach((page, index) => { page.section.hidden = index !== this.current; });
    this.back.hidden = this.step(-1) < 0;
    if (!this.busy) this.next.textContent = this.step(1) < 0 ? this.form.settings.submitButtonText || t('submit') : t('next');
    const shown = this.pages.map((_, index) => index).filter((index) => index === this.current || this.pageShown(index));
    const position = shown.indexOf(this.current) + 1;
    const pageOf = t('pageOf', { position, total: shown.length });
    this.progressText.textContent = pageOf;
    this.progressBar.setAttribute('aria-valuemax', String(shown.length));
    this.progressBar.setAttribute('aria-valuenow', String(position));
    this.progressBar.setAttribute('aria-valuetext', pageOf);
    this.progressFill.style.width = `${(position / shown.length) * 100}%`;
  }

  private goTo(index: number): void {
    this.current = index;
    this.pagesReached.reached(index);
    this.setAlert('');
    this.updateNavigation();
    if (this.host) this.host.navigated();
    else if (this.card.getBoundingClientRect().top < 0) this.card.scrollIntoView({ block: 'start' });
    this.pages[index].heading?.focus({ preventScroll: true });
    this.keepDraft();
  }

  private goBack(): void {
    const previous = this.step(-1);
    if (previous >= 0 && !this.busy) this.goTo(previous);
  }

  /** Shows the problems of one page; returns the control to fix first, if any. */
  private showProblems(index: number, problems: Map<string, string>): FieldControl | null {
    let first: FieldControl | null = null;
    for (const field of this.pages[index].fields) {
      const control = this.controls.get(field.id);
      if (!control || !control.element || control.element.hidden) continue;
      const problem = problems.get(field.id) ?? null;
      control.setError(problem);
      if (problem && !first) first = control;
    }
    return first;
  }

  private async advance(): Promise<void> {
    if (this.busy) return;
    const first = this.showProblems(this.current, this.problems());
    if (first) return first.focus();
    const next = this.step(1);
    if (next >= 0) return this.goTo(next);
    await this.submit();
  }

  private firstPageWithProblems(problems: Map<string, string>): number {
    return this.pages.findIndex((page, index) =>
      this.pageShown(index) && page.fields.some((field) => !field.hidden && problems.has(field.id)));
  }

  private async submit(): Promise<void> {
    this.setBusy(true);
    try {
      const controls = [...this.controls.values()];
      if (controls.some((control) => control.busy?.())) {
        this.next.textContent = t('finishingUploads');
        this.setStatus(t('waitingForUploads'));
      }
      await Promise.all(controls.map((control) => control.settled()));
      this.setStatus('');
      this.next.textContent = t('sending');
      const problems = this.problems();
      const page = this.firstPageWithProblems(problems);
      if (page >= 0) {
        this.goTo(page);
        this.showProblems(page, problems)?.focus();
        return;
      }
      const { values } = validateSubmission(this.structure, this.values());
      const body: SubmissionBody = {
        values, ...submitterDetails(byOrder(this.form.fields), values), language: language(), formVersion: this.form.version,
      };
      if (new Blob([JSON.stringify(body)]).size > BODY_LIMIT) return this.setAlert(failureMessage(413));
      if (this.payments) {
        const payment = await this.payments.pay(body, this.visible);
        if (payment.kind === 'declined') return payment.control.focus();
        if (payment.kind === 'refused') {
          const refused = payment.outcome;
          if (refused.kind === 'form-changed') return this.formChanged(refused.form);
          return refused.kind === 'field-errors' ? this.showServerErrors(refused.errors) : this.setAlert(refused.message);
        }
      }
      if (this.challenge) {
        try {
          body.captchaToken = await this.challenge.token();
        } catch {
          return this.setAlert(t('challengeFailed'));
        }
      }
      const outcome = await postSubmission(this.form.id, body);
      if (outcome.kind === 'success') return this.succeed(outcome.submissionId);
      if (outcome.kind === 'field-errors') return this.showServerErrors(outcome.errors);
      if (outcome.kind === 'form-changed') return this.formChanged(outcome.form);
      this.setAlert(outcome.message);
    } finally {
      this.setStatus('');
      this.setBusy(false);
      this.challenge?.reset();
    }
  }

  private showServerErrors(errors: Record<string, string>): void {
    const unplaced: string[] = [];
    let first: { page: number; control: FieldControl } | null = null;
    for (const [fieldId, message] of Object.entries(errors)) {
      const control = this.controls.get(fieldId);
      const page = this.pages.findIndex((view) => view.fields.some((field) => field.id === fieldId));
      if (!control || !control.element || control.element.hidden || page < 0) {
        unplaced.push(control ? `${control.field.label}: ${message}` : message);
        continue;
      }
      control.setError(message);
      const earlier = !first || page < first.page
        || (page === first.page && control.field.order < first.control.field.order);
      if (earlier) first = { page, control };
    }
    if (first) {
      this.goTo(first.page);
      first.control.focus();
    }
    if (unplaced.length) this.setAlert(t('notAccepted', { list: unplaced.join(' ') }));
  }

  private succeed(submissionId: string): void {
    this.submitted = true;
    clearDraft(this.form.id);
    this.track('complete');
    const redirect = safeRedirectUrl(this.form.settings.redirectUrl, window.location.href);
    this.formElement.hidden = true;
    this.progress.hidden = true;
    this.success.replaceChildren(
      h('span', { class: 'fs-success-icon', 'aria-hidden': 'true' }, '✓'),
      h('p', { class: 'fs-success-message' }, this.form.settings.successMessage || t('thankYou')));
    this.success.hidden = false;
    this.success.focus();
    // An embedding page navigates itself (a framed page may not navigate its parent).
    if (this.host) this.host.submitted(this.form.id, submissionId, redirect);
    else if (redirect) window.location.assign(redirect);
  }

  private setBusy(busy: boolean): void {
    this.busy = busy;
    this.formElement.setAttribute('aria-busy', String(busy));
    this.next.setAttribute('aria-disabled', String(busy));
    this.back.setAttribute('aria-disabled', String(busy));
    this.next.classList.toggle('is-busy', busy);
    if (busy) {
      this.setAlert('');
      this.next.textContent = t('sending');
    } else {
      this.updateNavigation();
    }
  }

  private setAlert(message: string): void {
    this.alert.textContent = message;
  }

  /** Word of something under way (not a problem). */
  private setStatus(message: string): void {
    this.status.textContent = message;
  }
}

/** "Questions marked * are required.", the asterisk where the language puts it, spoken as words. */
function requiredNote(): HTMLElement {
  const [before, after = ''] = t('requiredNote').split('{mark}');
  return h('p', { class: 'fs-required-note' }, before,
    h('span', { class: 'fs-required', 'aria-hidden': 'true' }, '*'), visuallyHidden(t('requiredNoteSpoken')), after);
}

/** The JSON a `<script type="application/json">` of the page holds, or null. */
function readJson(id: string): unknown {
  const data = document.getElementById(id);
  try {
    return data && data.textContent ? JSON.parse(data.textContent) : null;
  } catch {
    return null;
  }
}

function readForm(): PublicFormJson | null {
  return readJson('form-data') as PublicFormJson | null;
}

function start(): void {
  const root = document.getElementById('fs-app');
  const form = readForm();
  if (!root) return;
  useLanguage(form?.language ?? document.documentElement.lang, readJson('form-words'));
  if (!form) {
    root.replaceChildren(h('div', { class: 'fs-card fs-notice' }, h('p', {}, t('loadFailed'))));
    return;
  }
  new HostedForm(form, root, connectToHost());
}

start();
