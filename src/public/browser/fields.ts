// One accessible control per field type. Every control reports changes through FieldHooks and
// exposes its value in the shape the server validates (the one validate.ts checks).
import type { Field, FieldOption } from '../../domain/forms/types';
import { Child, domId, h, visuallyHidden } from './dom';
import { ControlParts, describedBy, FieldHooks, groupFrame, labelledFrame, requiredMark, helpText, errorSlot } from './frame';
import { signatureControl } from './signature';
import { uploadControl } from './uploads';
import { t } from './i18n';
import { formatAmount, isSplitName } from './values';

export interface FieldControl {
  readonly field: Field;
  /** Null for hidden fields: they only carry a prefilled value and are never shown. */
  readonly element: HTMLElement | null;
  value(): unknown;
  setValue(value: unknown): void;
  setError(message: string | null): void;
  focus(): void;
  /** Settles once no file is still being uploaded. */
  settled(): Promise<void>;
  /** See ControlParts. */
  busy?(): boolean;
  problem?(): string | null;
  kept?(): unknown;
  restore?(kept: unknown): void;
}

function fieldOptions(field: Field): FieldOption[] {
  const options: unknown = field.config.options;
  if (!Array.isArray(options)) return [];
  return options
    .filter((o): o is FieldOption => !!o && typeof o === 'object' && typeof o.value === 'string')
    .map((o) => ({ value: o.value, label: typeof o.label === 'string' && o.label ? o.label : o.value }));
}

function finish(field: Field, parts: ControlParts, on: FieldHooks): FieldControl {
  const { element } = parts;
  const error = element.querySelector<HTMLElement>('.fs-error');
  element.addEventListener('focusout', (event) => {
    const next = event.relatedTarget;
    if (!(next instanceof Node) || !element.contains(next)) on.left(field);
  });
  return {
    field,
    element,
    value: parts.value,
    setValue: parts.setValue,
    focus: parts.focus,
    settled: parts.settled ?? (() => Promise.resolve()),
    busy: parts.busy,
    problem: parts.problem,
    kept: parts.kept,
    restore: parts.restore,
    setError(message) {
      if (error) error.textContent = message ?? '';
      element.classList.toggle('fs-invalid', !!message);
      for (const target of parts.targets()) {
        if (message) target.setAttribute('aria-invalid', 'true');
        else target.removeAttribute('aria-invalid');
      }
    },
  };
}

function asString(value: unknown): string {
  return typeof value === 'string' || typeof value === 'number' ? String(value) : '';
}

interface TextOptions {
  type: string;
  autocomplete?: string;
  inputmode?: string;
  read?: (text: string) => unknown;
}

function textControl(field: Field, on: FieldHooks, options: TextOptions): ControlParts {
  const id = domId(field.id, 'input');
  const maxLength = field.config.maxLength ?? field.validationRules.maxLength;
  const input = h('input', {
    id,
    class: 'fs-input',
    type: options.type,
    placeholder: field.placeholder,
    required: field.required,
    autocomplete: options.autocomplete,
    inputmode: options.inputmode,
    maxlength: typeof maxLength === 'number' ? maxLength : null,
    'aria-describedby': describedBy(field),
  });
  input.addEventListener('input', () => on.changed(field));
  const read = options.read ?? ((text: string) => text);
  return {
    element: labelledFrame(field, id, input),
    targets: () => [input],
    value: () => read(input.value),
    setValue: (value) => { input.value = asString(value); },
    focus: () => input.focus(),
  };
}

const trimmed = (text: string): string => text.trim();

/** A decimal comma is accepted; anything that is not a number is passed on for the validator to name. */
function parseNumber(text: string): number | string {
  const clean = text.trim();
  const normalized = /^-?\d+,\d+$/.test(clean) ? clean.replace(',', '.') : clean;
  if (normalized === '') return '';
  const n = Number(normalized);
  return Number.isFinite(n) ? n : clean;
}

function textareaControl(field: Field, on: FieldHooks): ControlParts {
  const id = domId(field.id, 'input');
  const maxLength = field.config.maxLength ?? field.validationRules.maxLength;
  const textarea = h('textarea', {
    id,
    class: 'fs-input fs-textarea',
    rows: 4,
    placeholder: field.placeholder,
    required: field.required,
    maxlength: typeof maxLength === 'number' ? maxLength : null,
    'aria-describedby': describedBy(field),
  });
  textarea.addEventListener('input', () => on.changed(field));
  return {
    element: labelledFrame(field, id, textarea),
    targets: () => [textarea],
    value: () => textarea.value,
    setValue: (value) => { textarea.value = asString(value); },
    focus: () => textarea.focus(),
  };
}

function selectControl(field: Field, on: FieldHooks): ControlParts {
  const id = domId(field.id, 'input');
  const select = h('select', { id, class: 'fs-input fs-select', required: field.required, 'aria-describedby': describedBy(field) },
    h('option', { value: '' }, field.placeholder || t('selectOption')),
    ...fieldOptions(field).map((option) => h('option', { value: option.value }, option.label)));
  select.addEventListener('change', () => on.changed(field));
  return {
    element: labelledFrame(field, id, select),
    targets: () => [select],
    value: () => select.value,
    setValue: (value) => { select.value = asString(value); },
    focus: () => select.focus(),
  };
}

interface Choice {
  value: string;
  /** Visible text. */
  text: string;
  /** Spoken text, when the visible text alone is not enough (a star, a bare number). */
  spoken?: string;
}

type ChoiceLayout = 'list' | 'segmented' | 'stars' | 'likert';

function choiceInput(field: Field, choice: Choice, type: 'radio' | 'checkbox', layout: ChoiceLayout): HTMLLabelElement {
  const input = h('input', { type, name: domId(field.id, 'choice'), value: choice.value, class: 'fs-choice-input' });
  const face = layout === 'stars'
    ? h('span', { class: 'fs-choice-text' }, h('span', { 'aria-hidden': 'true' }, '★'), visuallyHidden(choice.spoken ?? choice.text))
    : h('span', { class: 'fs-choice-text' },
      choice.spoken ? h('span', { 'aria-hidden': 'true' }, choice.text) : choice.text,
      choice.spoken ? visuallyHidden(choice.spoken) : null);
  return h('label', { class: `fs-choice fs-choice--${layout}` }, input, face);
}

interface GroupOptions {
  multiple: boolean;
  layout: ChoiceLayout;
  read: (value: string) => unknown;
  extra?: Child;
}

function choiceGroup(field: Field, on: FieldHooks, choices: Choice[], options: GroupOptions): ControlParts {
  const type = options.multiple ? 'checkbox' : 'radio';
  const labels = choices.map((choice) => choiceInput(field, choice, type, options.layout));
  const inputs = labels.map((label) => label.querySelector('input')!);
  const list = h('div', { class: `fs-options fs-options--${options.layout}` }, ...labels);
  if (options.layout === 'segmented') {
    // One row when it fits; long scales (NPS) wrap into two even rows on narrow screens.
    list.style.setProperty('--fs-columns', String(choices.length));
    list.style.setProperty('--fs-columns-narrow', String(choices.length > 7 ? Math.ceil(choices.length / 2) : choices.length));
  }
  const litStars = (): void => {
    if (options.layout !== 'stars') return;
    const chosen = inputs.findIndex((input) => input.checked);
    labels.forEach((label, i) => label.classList.toggle('is-on', chosen >= 0 && i <= chosen));
  };
  list.addEventListener('change', () => {
    litStars();
    on.changed(field);
  });
  const checked = (): HTMLInputElement[] => inputs.filter((input) => input.checked);
  return {
    element: groupFrame(field, list, options.extra),
    targets: () => inputs,
    value: () => {
      const values = checked().map((input) => options.read(input.value));
      return options.multiple ? values : values[0];
    },
    setValue: (value) => {
      const wanted = (Array.isArray(value) ? value : [value]).map(asString);
      for (const input of inputs) input.checked = wanted.includes(input.value);
      litStars();
    },
    focus: () => (checked()[0] ?? inputs[0])?.focus(),
  };
}

function optionChoices(field: Field): Choice[] {
  return fieldOptions(field).map((option) => ({ value: option.value, text: option.label }));
}

function singleCheckbox(field: Field, on: FieldHooks): ControlParts {
  const id = domId(field.id, 'input');
  const input = h('input', { id, type: 'checkbox', class: 'fs-checkbox', required: field.required, 'aria-describedby': describedBy(field) });
  input.addEventListener('change', () => on.changed(field));
  const element = h('div', { class: 'fs-field fs-field--consent', 'data-field-id': field.id },
    h('div', { class: 'fs-consent' }, input, h('label', { class: 'fs-label', for: id }, field.label, ...requiredMark(field, false))),
    helpText(field),
    errorSlot(field));
  return {
    element,
    targets: () => [input],
    value: () => input.checked,
    setValue: (value) => { input.checked = value === true; },
    focus: () => input.focus(),
  };
}

function numberRange(min: number, max: number): number[] {
  const span = Math.max(0, Math.min(max - min, 100));
  return Array.from({ length: span + 1 }, (_, i) => min + i);
}

function configNumber(field: Field, key: string, fallback: number): number {
  const value = field.config[key];
  return typeof value === 'number' && Number.isInteger(value) ? value : fallback;
}

function configText(field: Field, key: string, fallback = ''): string {
  const value = field.config[key];
  return typeof value === 'string' ? value : fallback;
}

/** Numbered choices with optional words at both ends, which are also spoken with the end numbers. */
function scaleControl(field: Field, on: FieldHooks, min: number, max: number, ends: [string, string]): ControlParts {
  const [low, high] = ends;
  const choices = numberRange(min, max).map((n): Choice => {
    const end = n === min ? low : n === max ? high : '';
    return { value: String(n), text: String(n), spoken: end ? `${n} – ${end}` : undefined };
  });
  const endLabels = low || high
    ? h('div', { class: 'fs-scale-ends', 'aria-hidden': 'true' }, h('span', {}, low), h('span', {}, high))
    : null;
  return choiceGroup(field, on, choices, { multiple: false, layout: 'segmented', read: Number, extra: endLabels });
}

function ratingControl(field: Field, on: FieldHooks): ControlParts {
  const max = configNumber(field, 'max', 5);
  const choices = numberRange(1, max).map((n): Choice => ({ value: String(n), text: String(n), spoken: t('stars', { value: n, count: max }) }));
  return choiceGroup(field, on, choices, { multiple: false, layout: 'stars', read: Number });
}

function rankingControl(field: Field, on: FieldHooks): ControlParts {
  const labels = new Map(fieldOptions(field).map((option) => [option.value, option.label]));
  let order = [...labels.keys()];
  const list = h('ol', { class: 'fs-ranking' });
  const status = h('p', { class: 'fs-sr-only', 'aria-live': 'polite' });

  const move = (index: number, delta: -1 | 1): void => {
    const target = index + delta;
    [order[index], order[target]] = [order[target], order[index]];
    render();
    const label = labels.get(order[target]) ?? order[target];
    status.textContent = t('rankPosition', { label, position: target + 1, total: order.length });
    const buttons = list.children[target].querySelectorAll('button');
    const same = buttons[delta < 0 ? 0 : 1];
    (same.disabled ? buttons[delta < 0 ? 1 : 0] : same).focus();
    on.changed(field);
  };

  const item = (value: string, index: number): HTMLLIElement => {
    const label = labels.get(value) ?? value;
    const up = h('button', { type: 'button', class: 'fs-rank-move', 'aria-label': t('moveUp', { label }), disabled: index === 0 }, '↑');
    const down = h('button', { type: 'button', class: 'fs-rank-move', 'aria-label': t('moveDown', { label }), disabled: index === order.length - 1 }, '↓');
    up.addEventListener('click', () => move(index, -1));
    down.addEventListener('click', () => move(index, 1));
    return h('li', { class: 'fs-rank-item' },
      h('span', { class: 'fs-rank-position', 'aria-hidden': 'true' }, String(index + 1)),
      h('span', { class: 'fs-rank-label' }, label),
      h('span', { class: 'fs-rank-buttons' }, up, down));
  };

  function render(): void {
    list.replaceChildren(...order.map(item));
  }
  render();
  const hint = h('p', { class: 'fs-help' }, t('rankingHint'));
  return {
    element: groupFrame(field, hint, list, status),
    targets: () => [list],
    // The order shown is the answer: it is always a complete ranking.
    value: () => [...order],
    setValue: (value) => {
      if (Array.isArray(value) && value.length === order.length && order.every((v) => value.includes(v))) {
        order = value.map(String);
        render();
      }
    },
    focus: () => list.querySelector<HTMLButtonElement>('button:not([disabled])')?.focus(),
  };
}

function nameControl(field: Field, on: FieldHooks): ControlParts {
  if (!isSplitName(field)) {
    const full = textControl(field, on, { type: 'text', autocomplete: 'name' });
    return {
      ...full,
      value: () => ({ format: 'full', fullName: asString(full.value()) }),
      setValue: (value) => full.setValue(value && typeof value === 'object' ? (value as { fullName?: unknown }).fullName : value),
    };
  }
  const part = (suffix: string, text: string, autocomplete: string): HTMLInputElement => {
    const input = h('input', { id: domId(field.id, suffix), class: 'fs-input', type: 'text', autocomplete, required: field.required, 'aria-describedby': describedBy(field) });
    input.addEventListener('input', () => on.changed(field));
    return input;
  };
  const first = part('first', t('firstName'), 'given-name');
  const last = part('last', t('lastName'), 'family-name');
  const cell = (input: HTMLInputElement, text: string): HTMLElement =>
    h('div', { class: 'fs-name-part' }, h('label', { class: 'fs-sublabel', for: input.id }, text), input);
  return {
    element: groupFrame(field, h('div', { class: 'fs-name-parts' }, cell(first, t('firstName')), cell(last, t('lastName')))),
    targets: () => [first, last],
    value: () => ({ format: 'split', firstName: first.value, lastName: last.value }),
    setValue: (value) => {
      const name = value && typeof value === 'object' ? value as Record<string, unknown> : {};
      first.value = asString(name.firstName);
      last.value = asString(name.lastName);
    },
    focus: () => first.focus(),
  };
}

function paymentControl(field: Field, on: FieldHooks): ControlParts {
  const amount = formatAmount(field.config.amount, field.config.currency);
  const noteId = domId(field.id, 'note');
  const parts = textControl(field, on, { type: 'text', read: trimmed, autocomplete: 'off' });
  const input = parts.element.querySelector('input')!;
  input.setAttribute('aria-describedby', describedBy(field, noteId));
  input.setAttribute('spellcheck', 'false');
  if (!input.placeholder) input.placeholder = 'pi_…';
  const note = h('p', { class: 'fs-help', id: noteId },
    amount ? `${t('amountDue', { amount })} ` : '',
    t('paymentReference'));
  input.insertAdjacentElement('beforebegin', note);
  return parts;
}

function headingControl(field: Field, level: 2 | 3): ControlParts {
  const element = h('div', { class: 'fs-heading', 'data-field-id': field.id },
    h(level === 2 ? 'h2' : 'h3', { class: 'fs-heading-title' }, field.label),
    field.description ? h('p', { class: 'fs-help' }, field.description) : null);
  return { element, targets: () => [], value: () => undefined, setValue: () => undefined, focus: () => undefined };
}

function hiddenControl(field: Field): FieldControl {
  let value: unknown;
  return {
    field,
    element: null,
    value: () => value,
    setValue: (next) => { value = next; },
    setError: () => undefined,
    focus: () => undefined,
    settled: () => Promise.resolve(),
  };
}

/** What a control may need to know of the page it is on. */
export interface ControlContext {
  formId: string;
  headingLevel: 2 | 3;
}

function parts(field: Field, on: FieldHooks, context: ControlContext): ControlParts {
  switch (field.type) {
    case 'email':
      return textControl(field, on, { type: 'email', autocomplete: 'email', read: trimmed });
    case 'phone':
      return textControl(field, on, { type: 'tel', autocomplete: 'tel', read: trimmed });
    case 'url':
      return textControl(field, on, { type: 'url', autocomplete: 'url', read: trimmed });
    case 'number':
      // A text input with a numeric keyboard: type=number silently drops what it cannot parse.
      return textControl(field, on, { type: 'text', inputmode: 'decimal', read: parseNumber });
    case 'date':
      return textControl(field, on, { type: 'date' });
    case 'textarea':
      return textareaControl(field, on);
    case 'select':
      return selectControl(field, on);
    case 'radio':
      return choiceGroup(field, on, optionChoices(field), { multiple: false, layout: 'list', read: String });
    case 'likert-score':
      return choiceGroup(field, on, optionChoices(field), { multiple: false, layout: 'likert', read: String });
    case 'checkbox':
      return fieldOptions(field).length
        ? choiceGroup(field, on, optionChoices(field), { multiple: true, layout: 'list', read: String })
        : singleCheckbox(field, on);
    case 'rating':
      return ratingControl(field, on);
    case 'scale':
      return scaleControl(field, on, configNumber(field, 'min', 1), configNumber(field, 'max', 10),
        [configText(field, 'minLabel'), configText(field, 'maxLabel')]);
    case 'nps':
      return scaleControl(field, on, 0, 10,
        [configText(field, 'minLabel', t('npsLow')), configText(field, 'maxLabel', t('npsHigh'))]);
    case 'ranking':
      return rankingControl(field, on);
    case 'signature':
      return signatureControl(field, on);
    case 'name':
      return nameControl(field, on);
    case 'file-upload':
      return uploadControl(field, on, context.formId);
    case 'payment':
      return paymentControl(field, on);
    case 'heading':
      return headingControl(field, context.headingLevel);
    default:
      return textControl(field, on, { type: 'text' });
  }
}

export function createControl(field: Field, on: FieldHooks, context: ControlContext): FieldControl {
  if (field.hidden) return hiddenControl(field);
  return finish(field, parts(field, on, context), on);
}
