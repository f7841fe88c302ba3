import type { Field } from '../../domain/forms/types';
import type { BatchItemOutcome } from '../../domain/submissions/batch-submission';
import type { FileLinks } from '../../domain/files/links';
import type { SubmissionRecord } from '../../domain/submissions/read-service';
import { keyByLabel, shownValues } from '../../domain/submissions/shown-values';
import { refusalToApiError } from './refusals';

/** A submission in a list: sensitive values redacted, files as links, keyed by field id. */
export function presentSubmissionListItem(s: SubmissionRecord, links: FileLinks) {
  return {
    id: s.id, submitterEmail: s.submitterEmail, submitterName: s.submitterName, language: s.language,
    createdAt: s.createdAt.toISOString(), formVersion: s.formVersion, data: shownValues(s.data, links),
  };
}

/** One submission: its values keyed by the form's current labels (`data`) and by field id (`rawData`). */
export function presentSubmission(submission: SubmissionRecord & { formTitle: string }, fields: Field[], links: FileLinks) {
  const rawData = shownValues(submission.data, links);
  return {
    id: submission.id, formId: submission.formId, formTitle: submission.formTitle,
    submitterEmail: submission.submitterEmail, submitterName: submission.submitterName, language: submission.language,
    createdAt: submission.createdAt.toISOString(), formVersion: submission.formVersion,
    data: keyByLabel(rawData, fields), rawData,
  };
}

/** One item of a batch's answer: its own status, and the submission or the error. */
export function presentBatchItem(outcome: BatchItemOutcome) {
  if (outcome.ok) return { index: outcome.index, status: 201, submission: outcome.submission };
  const error = refusalToApiError(outcome.refusal);
  return { index: outcome.index, status: error.status, error: error.toJSON() };
}
