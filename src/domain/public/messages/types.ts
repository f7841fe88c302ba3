// The shape every catalogue has: en.ts's keys, a plain string where English has one and a plural
// (Intl.PluralRules categories, `other` required) where English has one.
import type { en } from './en';

export type PluralForms = { other: string } & Partial<Record<'zero' | 'one' | 'two' | 'few' | 'many', string>>;
export type MessageKey = keyof typeof en;
export type Messages = { [K in MessageKey]: (typeof en)[K] extends string ? string : PluralForms };
