// File-upload fields (README "Files"): each chosen file is uploaded as soon as it is picked — the
// service is asked where its bytes go, then they are sent there with upload progress — and the
// field's value is the uploads' ids, never the bytes. Per file: name, size, a progress bar, and
// Retry (a failed upload) or Remove. A file the field refuses is named with the reason and never sent.
import type { Field } from '../../domain/forms/types';
import { requestUpload, sendUpload, type Sending, type UploadTicket } from './api';
import { domId, h } from './dom';
import { ControlParts, describedBy, FieldHooks, labelledFrame } from './frame';
import { fileLimits } from '../../domain/files/rules';
import { percentText, t } from './i18n';
import { declaredType, fileRefusal, formatBytes, uploadHint } from './values';
import { uploadClaims } from './draft';

type UploadState = 'uploading' | 'done' | 'failed' | 'refused';

/** A ticket this close to its expiry is not reused for a retry: a fresh one is asked for. */
const TICKET_MARGIN_MS = 60_000;

interface Entry {
  /** For an upload put back from the answers kept in the browser (draft.ts): an empty stand-in named as the upload. */
  readonly file: File;
  readonly size: number;
  readonly type: string;
  state: UploadState;
  ticket: UploadTicket | null;
  /** The failure left the ticket usable (the connection or the store failed, not the ticket). */
  reusable: boolean;
  sending: Sending | null;
  removed: boolean;
  /** Settles when the current attempt has ended, whatever its outcome. */
  attempt: Promise<void>;
  /** When the upload finished (ms since the epoch), for the answers kept in the browser. */
  uploadedAt: number;
  readonly view: EntryView;
}

interface EntryView {
  item: HTMLLIElement;
  bar: HTMLElement;
  fill: HTMLElement;
  message: HTMLElement;
  retry: HTMLButtonElement;
  remove: HTMLButtonElement;
}

function percent(sent: number, size: number): number {
  return size > 0 ? Math.min(100, Math.floor((sent / size) * 100)) : 100;
}

let views = 0;

function entryView(field: Field, file: File, bytes: number): EntryView {
  const nameId = domId(field.id, `upload-${++views}`);
  const size = formatBytes(bytes);
  const fill = h('span', { class: 'fs-progress-fill' });
  const bar = h('div', {
    class: 'fs-progress-track fs-upload-track', role: 'progressbar', 'aria-labelledby': nameId,
    'aria-valuemin': 0, 'aria-valuemax': 100, 'aria-valuenow': 0,
  }, fill);
  const message = h('p', { class: 'fs-upload-message' });
  const retry = h('button', { type: 'button', class: 'fs-button fs-button--small fs-button--secondary', 'aria-label': t('retryLabel', { name: file.name }), hidden: true }, t('retry'));
  const remove = h('button', { type: 'button', class: 'fs-button fs-button--small fs-button--secondary', 'aria-label': t('removeLabel', { name: file.name }) }, t('remove'));
  const item = h('li', { class: 'fs-upload' },
    h('div', { class: 'fs-upload-head' },
      h('span', { class: 'fs-upload-name', id: nameId }, file.name),
      h('span', { class: 'fs-upload-size' }, size)),
    bar,
    h('div', { class: 'fs-upload-foot' }, message, h('span', { class: 'fs-upload-actions' }, retry, remove)));
  return { item, bar, fill, message, retry, remove };
}

export function uploadControl(field: Field, on: FieldHooks, formId: string): ControlParts {
  // The public form's maxSize is already capped by UPLOAD_MAX_BYTES (buildPublicForm): no cap of its own here.
  const limits = fileLimits(field, Number.MAX_SAFE_INTEGER);
  const id = domId(field.id, 'input');
  const hintId = domId(field.id, 'file');
  // The native input is visually hidden behind a label of our own: its "No file chosen" would be
  // wrong once files are listed below it, and its button text cannot be changed.
  const input = h('input', {
    id, type: 'file', class: 'fs-file-input', accept: limits.accept.join(',') || null, multiple: limits.maxFiles > 1,
    required: field.required, 'aria-describedby': describedBy(field, hintId),
  });
  const pickText = h('span', { class: 'fs-file-button' });
  const picker = h('div', { class: 'fs-file-picker' }, input, h('label', { class: 'fs-file', for: id }, pickText));
  const hint = h('p', { class: 'fs-file-info', id: hintId }, uploadHint(limits));
  const list = h('ul', { class: 'fs-uploads', 'aria-label': t('filesFor', { label: field.label }) });
  const announcer = h('p', { class: 'fs-sr-only', 'aria-live': 'polite' });
  const element = labelledFrame(field, id, picker, hint, list, announcer);
  const entries: Entry[] = [];

  const announce = (text: string): void => { announcer.textContent = text; };
  const attached = (): Entry[] => entries.filter((entry) => entry.state !== 'refused');

  /** The picker is offered while the field takes more files. */
  function updatePicker(): void {
    const count = attached().length;
    const full = count >= limits.maxFiles;
    picker.hidden = full;
    pickText.textContent = t(limits.maxFiles === 1 ? 'chooseFile' : count ? 'addAnotherFile' : 'chooseFiles');
    hint.textContent = full && limits.maxFiles > 1
      ? t('filesLimitReached', { count: limits.maxFiles })
      : uploadHint(limits);
  }

  function show(entry: Entry, message: string, sent = 0): void {
    const { item, bar, fill, retry } = entry.view;
    const shown = entry.state === 'done' ? 100 : percent(sent, entry.size);
    item.dataset.state = entry.state;
    bar.hidden = entry.state === 'refused';
    bar.setAttribute('aria-valuenow', String(shown));
    bar.setAttribute('aria-valuetext', entry.state === 'done'
      ? t('uploadedName', { name: entry.file.name })
      : t('uploadProgress', { percent: percentText(shown), size: formatBytes(entry.size) }));
    fill.style.width = `${shown}%`;
    retry.hidden = entry.state !== 'failed';
    entry.view.message.textContent = message;
  }

  function fail(entry: Entry, message: string, reusable: boolean): void {
    entry.state = 'failed';
    entry.reusable = reusable;
    show(entry, t('notUploaded', { message }));
    announce(t('didNotUpload', { name: entry.file.name, message }));
  }

  function refuse(entry: Entry, message: string): void {
    entry.state = 'refused';
    show(entry, message);
    announce(message);
  }

  function ticketUsable(entry: Entry): entry is Entry & { ticket: UploadTicket } {
    if (!entry.ticket || !entry.reusable) return false;
    const expires = Date.parse(entry.ticket.expiresAt);
    return !Number.isFinite(expires) || expires - Date.now() > TICKET_MARGIN_MS;
  }

  async function upload(entry: Entry): Promise<void> {
    const { file } = entry;
    entry.state = 'uploading';
    show(entry, t('uploading'));
    if (!ticketUsable(entry)) {
      const asked = await requestUpload(formId, { fieldId: field.id, name: file.name, type: entry.type, size: file.size });
      if (entry.removed) return;
      if (asked.kind === 'refused') return refuse(entry, asked.message);
      if (asked.kind === 'failed') return fail(entry, asked.message, false);
      entry.ticket = asked.ticket;
    }
    entry.sending = sendUpload(entry.ticket!, file, (sent) => show(entry, t('uploadingPercent', { percent: percentText(percent(sent, file.size)) }), sent));
    const outcome = await entry.sending.done;
    entry.sending = null;
    if (entry.removed) return;
    if (outcome.kind === 'failed') {
      // A refused PUT (an expired or rejected signature) needs a new ticket; a lost connection does not.
      const reusable = outcome.status === 0 || outcome.status === 429 || outcome.status >= 500;
      return fail(entry, outcome.message, reusable);
    }
    entry.state = 'done';
    entry.uploadedAt = Date.now();
    show(entry, t('uploaded'));
    announce(t('uploadedAnnounce', { name: file.name }));
  }

  function start(entry: Entry): void {
    entry.attempt = upload(entry).then(() => {
      updatePicker();
      if (!entry.removed) on.changed(field);
    });
  }

  function remove(entry: Entry): void {
    entry.removed = true;
    entry.sending?.abort();
    entries.splice(entries.indexOf(entry), 1);
    entry.view.item.remove();
    updatePicker();
    announce(t('removedAnnounce', { name: entry.file.name }));
    input.focus();
    on.changed(field);
  }

  function track(file: File, size: number, ticket: UploadTicket | null): Entry {
    const view = entryView(field, file, size);
    const entry: Entry = {
      file, size, type: declaredType(file), state: 'uploading', ticket, reusable: false, sending: null,
      removed: false, attempt: Promise.resolve(), uploadedAt: 0, view,
    };
    view.retry.addEventListener('click', () => {
      view.remove.focus();
      start(entry);
    });
    view.remove.addEventListener('click', () => remove(entry));
    entries.push(entry);
    list.appendChild(view.item);
    return entry;
  }

  function add(file: File): void {
    const entry = track(file, file.size, null);
    const refusal = attached().length > limits.maxFiles
      ? t('tooManyFiles', { name: file.name, count: limits.maxFiles })
      : fileRefusal(limits, file);
    if (refusal) return refuse(entry, refusal);
    announce(t('uploadingAnnounce', { name: file.name, size: formatBytes(file.size) }));
    start(entry);
  }

  updatePicker();
  input.addEventListener('change', () => {
    const files = input.files ? Array.from(input.files) : [];
    // Each pick starts afresh as far as refusals go: the reasons shown are about the latest files.
    for (const entry of entries.filter((e) => e.state === 'refused')) {
      entries.splice(entries.indexOf(entry), 1);
      entry.view.item.remove();
    }
    files.forEach(add);
    // Emptied so that the same file can be picked again after it is removed.
    input.value = '';
    updatePicker();
    if (picker.hidden) entries[entries.length - 1]?.view.remove.focus();
    on.changed(field);
  });

  const uploadIds = (): Array<{ uploadId: string }> =>
    entries.filter((entry) => entry.state === 'done').map((entry) => ({ uploadId: entry.ticket!.uploadId }));

  return {
    element,
    targets: () => [input],
    value: () => {
      const ids = uploadIds();
      if (!ids.length) return undefined;
      return limits.maxFiles > 1 ? ids : ids[0];
    },
    // Uploads are never prefilled: an upload id names bytes this person has not chosen.
    setValue: () => undefined,
    focus: () => (picker.hidden ? entries.find((e) => e.state === 'failed')?.view.retry ?? entries[0]?.view.remove : input)?.focus(),
    settled: async () => {
      // A retry started while waiting is waited for too.
      while (entries.some((entry) => entry.state === 'uploading')) {
        await Promise.all(entries.map((entry) => entry.attempt));
      }
    },
    busy: () => entries.some((entry) => entry.state === 'uploading'),
    // Kept in the browser as claims, never bytes: the upload is already the service's.
    kept: () => {
      const claims = entries.filter((entry) => entry.state === 'done')
        .map((entry) => ({ uploadId: entry.ticket!.uploadId, name: entry.file.name, size: entry.size, uploadedAt: entry.uploadedAt }));
      return claims.length ? claims : undefined;
    },
    restore: (kept) => {
      for (const entry of [...entries]) {
        entry.removed = true;
        entry.sending?.abort();
        entry.view.item.remove();
      }
      entries.length = 0;
      for (const claim of uploadClaims(kept) ?? []) {
        if (attached().length >= limits.maxFiles) break;
        const entry = track(new File([], claim.name), claim.size, { uploadId: claim.uploadId, url: '', method: 'PUT', headers: {}, expiresAt: '' });
        entry.state = 'done';
        entry.uploadedAt = claim.uploadedAt;
        show(entry, 'Uploaded');
      }
      updatePicker();
    },
    problem: () => {
      const failed = entries.find((entry) => entry.state === 'failed');
      return failed ? t('unfinishedUpload', { name: failed.file.name }) : null;
    },
  };
}
