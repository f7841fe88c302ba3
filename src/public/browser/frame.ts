// The frame every field shares: label or legend, help text, error slot, and how they are wired
// together with aria-describedby.
import type { Field } from '../../domain/forms/types';
import { Child, domId, h, visuallyHidden } from './dom';
import { t } from './i18n';

/** How a control tells the form about its field (fields.ts, signature.ts, uploads.ts, payment.ts). */
export interface FieldHooks {
  /** The person changed the field's value. */
  changed(field: Field): void;
  /** Focus left the field. */
  left(field: Field): void;
}

/** What a field type builds; fields.ts turns it into a FieldControl. */
export interface ControlParts {
  element: HTMLElement;
  /** Elements that carry aria-invalid. */
  targets: () => HTMLElement[];
  value(): unknown;
  setValue(value: unknown): void;
  focus(): void;
  settled?: () => Promise<void>;
  /** An answer is on its way (a file still uploading): the field is not reported as unanswered. */
  busy?: () => boolean;
  /** A problem only the control knows of (an upload that failed), or null. */
  problem?: () => string | null;
  /** What the answers kept in the browser hold of it (draft.ts), when that differs from value(): an upload's claims. */
  kept?: () => unknown;
  /** Puts back what kept() gave, when setValue does not take it. */
  restore?: (kept: unknown) => void;
}

export function describedBy(field: Field, ...extra: string[]): string {
  const ids = field.description ? [domId(field.id, 'help')] : [];
  return [...ids, ...extra, domId(field.id, 'error')].join(' ');
}

export function requiredMark(field: Field, spoken: boolean): Child[] {
  if (!field.required) return [];
  return [h('span', { class: 'fs-required', 'aria-hidden': 'true' }, ' *'), spoken && visuallyHidden(` ${t('requiredSpoken')}`)];
}

export function helpText(field: Field): Child {
  return field.description ? h('p', { class: 'fs-help', id: domId(field.id, 'help') }, field.description) : null;
}

export function errorSlot(field: Field): HTMLElement {
  return h('p', { class: 'fs-error', id: domId(field.id, 'error'), role: 'alert' });
}

/** A labelled single control: label, help, control, error. */
export function labelledFrame(field: Field, controlId: string, ...controls: Child[]): HTMLElement {
  return h('div', { class: `fs-field fs-field--${field.type}`, 'data-field-id': field.id },
    h('label', { class: 'fs-label', for: controlId }, field.label, ...requiredMark(field, false)),
    helpText(field),
    ...controls,
    errorSlot(field));
}

/** A group of controls under one legend; screen readers announce the legend with each control. */
export function groupFrame(field: Field, ...controls: Child[]): HTMLFieldSetElement {
  return h('fieldset', { class: `fs-field fs-group fs-field--${field.type}`, 'data-field-id': field.id, 'aria-describedby': describedBy(field) },
    h('legend', { class: 'fs-label' }, field.label, ...requiredMark(field, true)),
    helpText(field),
    ...controls,
    errorSlot(field));
}

