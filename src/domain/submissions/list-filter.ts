/** Which page of a form's submissions a list reads (listSubmissions, listSubmissionRows). */
export interface ListFilter {
  limit: number;
  offset: number;
  from: Date | null;
  /** Exclusive. */
  until: Date | null;
}
