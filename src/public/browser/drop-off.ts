// Drop-off: which pages of a multi-page form a visitor reached, sent as `page` events (counted per
// form, UTC day and page by the service; GET /v1/forms/{id}/analytics `reached`). Each page once
// per page load, whether reached forwards or back. The view and the first answer typed are the
// `view` and `start` events form.ts sends.
import type { PublicFormJson } from '../../domain/public/types';
import { sendEvent } from './api';

export class PagesReached {
  private readonly ids: string[];
  private readonly sent = new Set<string>();

  /** Page ids in the order form.ts lays pages out (by `order`); none for a form without pages. */
  constructor(private readonly form: PublicFormJson) {
    this.ids = [...form.pages].sort((a, b) => a.order - b.order).map((page) => page.id);
  }

  /** The page at `index` (form.ts's layout) is shown. */
  reached(index: number): void {
    const id = this.ids[index];
    const token = this.form.telemetry && this.form.telemetry.analyticsToken;
    if (!id || !token || this.sent.has(id)) return;
    this.sent.add(id);
    sendEvent(this.form.id, token, 'page', id);
  }
}
