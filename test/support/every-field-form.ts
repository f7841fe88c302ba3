// A form holding every field type over two pages, for the hosted page's browser tests
// (test/e2e/accessibility.test.ts, test/e2e/kept-answers.test.ts).
import { fieldInput as field } from './harness';

const options = [{ label: 'Yes', value: 'yes' }, { label: 'No', value: 'no' }];

/** Every field type over two pages; page 2 holds the rating, scale, NPS, likert, ranking, signature and upload. */
export function everyFieldForm(extra: Record<string, unknown> = {}) {
  const p1 = { pageId: 'p_one' };
  const p2 = { pageId: 'p_two' };
  return {
    title: 'Every field',
    description: 'A form holding every field type.',
    pages: [{ id: 'p_one', title: 'About you', order: 0 }, { id: 'p_two', title: 'Your opinion', order: 1 }],
    fields: [
      field('fld_heading', 'heading', 'Contact details', { order: 0, ...p1, description: 'How we reach you.' }),
      field('fld_name', 'name', 'Name', { required: true, order: 1, ...p1, config: { format: 'split' } }),
      field('fld_text', 'text', 'Company', { required: true, order: 2, ...p1, description: 'Where you work.' }),
      field('fld_email', 'email', 'Email', { required: true, order: 3, ...p1 }),
      field('fld_phone', 'phone', 'Phone', { order: 4, ...p1 }),
      field('fld_url', 'url', 'Website', { order: 5, ...p1 }),
      field('fld_number', 'number', 'Team size', { required: true, order: 6, ...p1 }),
      field('fld_date', 'date', 'Start date', { required: true, order: 7, ...p1 }),
      field('fld_textarea', 'textarea', 'Notes', { order: 8, ...p1 }),
      field('fld_select', 'select', 'Plan', { required: true, order: 9, ...p1, config: { options: [{ label: 'Free', value: 'free' }, { label: 'Pro', value: 'pro' }] } }),
      field('fld_radio', 'radio', 'Newsletter', { required: true, order: 10, ...p1, config: { options } }),
      field('fld_checks', 'checkbox', 'Interests', { order: 11, ...p1, config: { options: [{ label: 'Forms', value: 'forms' }, { label: 'Surveys', value: 'surveys' }] } }),
      field('fld_secret', 'text', 'Tax number', { order: 12, ...p1, config: { sensitive: true } }),
      field('fld_consent', 'checkbox', 'I agree to the terms', { required: true, order: 13, ...p1 }),
      field('fld_rating', 'rating', 'Rating', { required: true, order: 0, ...p2, config: { max: 5 } }),
      field('fld_scale', 'scale', 'Ease of use', { required: true, order: 1, ...p2, config: { min: 1, max: 5, minLabel: 'Hard', maxLabel: 'Easy' } }),
      field('fld_nps', 'nps', 'Recommend us', { required: true, order: 2, ...p2 }),
      field('fld_likert', 'likert-score', 'The docs are clear', { required: true, order: 3, ...p2, config: { options: [{ label: 'Disagree', value: 'disagree' }, { label: 'Neutral', value: 'neutral' }, { label: 'Agree', value: 'agree' }] } }),
      field('fld_ranking', 'ranking', 'Rank the features', { order: 4, ...p2, config: { options: [{ label: 'Speed', value: 'speed' }, { label: 'Price', value: 'price' }, { label: 'Support', value: 'support' }] } }),
      field('fld_signature', 'signature', 'Signature', { required: true, order: 5, ...p2 }),
      field('fld_upload', 'file-upload', 'Attachment', { order: 6, ...p2, config: { accept: ['image/*'] } }),
    ],
    settings: { submitButtonText: 'Send answers', successMessage: 'Thanks for your answers.' },
    ...extra,
  };
}

