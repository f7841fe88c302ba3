// Shapes of a form's structure as the API and the public runtime see them.
// Pure types only: this file is bundled into the hosted page too.

export const FIELD_TYPES = [
  'text', 'email', 'textarea', 'select', 'checkbox', 'radio', 'number', 'date', 'phone', 'url',
  'file-upload', 'rating', 'scale', 'nps', 'likert-score', 'ranking', 'signature', 'heading',
  'name', 'payment',
] as const;
export type FieldType = (typeof FIELD_TYPES)[number];

export const OPERATORS = [
  'equals', 'notEquals', 'contains', 'notContains', 'greaterThan', 'lessThan',
  'greaterThanOrEquals', 'lessThanOrEquals', 'isEmpty', 'isNotEmpty',
] as const;
export type Operator = (typeof OPERATORS)[number];

export interface ConditionRule {
  fieldId: string;
  operator: Operator;
  value?: unknown;
}

export interface ConditionalLogic {
  show: boolean;
  logic: 'all' | 'any';
  rules: ConditionRule[];
}

export interface FieldOption {
  label: string;
  value: string;
}

export interface Page {
  id: string;
  title: string;
  description: string | null;
  order: number;
  conditionalLogic: ConditionalLogic | null;
}

export interface Field {
  id: string;
  type: FieldType;
  label: string;
  placeholder: string | null;
  description: string | null;
  required: boolean;
  config: Record<string, any>;
  validationRules: Record<string, any>;
  order: number;
  pageId: string | null;
  conditionalLogic: ConditionalLogic | null;
  hidden?: boolean;
  prefillParam?: string;
}

/** The part of a form that validation needs: its ordered pages and fields. */
export interface FormStructure {
  pages: Page[];
  fields: Field[];
}
