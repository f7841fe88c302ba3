// Embed script: `<script src="https://forms.example.com/embed.js" data-form="form_abc" async></script>`
// puts the hosted page of the form in an iframe right after the tag, sizes it to its content and
// announces completion with a `formservice:submitted` DOM event (cancelable: cancelling it stops
// the redirect the form may be configured with).
import { safeRedirectUrl } from './urls';

const FORM_ID = /^form_[a-zA-Z0-9]+$/;
const PROCESSED = 'data-formservice-embedded';
const INITIAL_HEIGHT = '480px';
const MAX_HEIGHT = 100000;

function scriptOrigin(script: HTMLScriptElement): string | null {
  try {
    const url = new URL(script.src, window.location.href);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : null;
  } catch {
    return null;
  }
}

const UTM_PARAMETER = /^utm_[A-Za-z0-9_]+$/;

const LANGUAGE_TAG = /^[A-Za-z]{2,8}(?:-[A-Za-z0-9]{1,8}){0,4}$/;

/**
 * The language the frame is asked for: the tag's `data-lang`, else the host page's `?lang=`; none
 * leaves it to the form and the browser's Accept-Language, which the frame's request carries too
 * (README.md "Languages").
 */
function frameLanguage(script: HTMLScriptElement): string | null {
  const candidates = [script.getAttribute('data-lang'), new URLSearchParams(window.location.search).get('lang')];
  return candidates.find((tag): tag is string => !!tag && LANGUAGE_TAG.test(tag)) ?? null;
}

/**
 * The hosted page address. Of the host page's query parameters only the form's prefill parameters
 * and `utm_*` pass through: others (password-reset tokens, OAuth codes) are none of the form's business.
 */
function frameUrl(origin: string, formId: string, prefillNames: ReadonlySet<string>, language: string | null): string {
  const url = new URL(`/f/${encodeURIComponent(formId)}`, origin);
  new URLSearchParams(window.location.search).forEach((value, key) => {
    if (key !== 'embed' && key !== 'lang' && (prefillNames.has(key) || UTM_PARAMETER.test(key))) url.searchParams.append(key, value);
  });
  if (language) url.searchParams.set('lang', language);
  url.searchParams.set('embed', '1');
  return url.href;
}

function hasForwardableCandidates(): boolean {
  let found = false;
  new URLSearchParams(window.location.search).forEach((_value, key) => {
    if (key !== 'embed' && !UTM_PARAMETER.test(key)) found = true;
  });
  return found;
}

/** The form's prefill parameter names, from its public description; none when it cannot be read. */
async function prefillParameterNames(origin: string, formId: string): Promise<Set<string>> {
  if (!hasForwardableCandidates()) return new Set();
  try {
    const response = await fetch(`${origin}/public/forms/${encodeURIComponent(formId)}`, { credentials: 'omit' });
    if (!response.ok) return new Set();
    const form: unknown = await response.json();
    const fields: unknown = form && typeof form === 'object' ? (form as { fields?: unknown }).fields : null;
    if (!Array.isArray(fields)) return new Set();
    return new Set(fields
      .map((field) => (field && typeof field === 'object' ? (field as { prefillParam?: unknown }).prefillParam : undefined))
      .filter((name): name is string => typeof name === 'string'));
  } catch {
    return new Set();
  }
}

function place(script: HTMLScriptElement, iframe: HTMLIFrameElement): void {
  const parent = script.parentNode;
  if (parent && parent !== document.head) {
    parent.insertBefore(iframe, script.nextSibling);
  } else if (document.body) {
    document.body.appendChild(iframe);
  } else {
    document.addEventListener('DOMContentLoaded', () => document.body.appendChild(iframe));
  }
}

function announceSubmission(iframe: HTMLIFrameElement, formId: string, data: Record<string, unknown>): void {
  const detail = { formId, submissionId: String(data.submissionId) };
  // Bubbling carries the event from the iframe through its ancestors to document and window.
  const event = new CustomEvent('formservice:submitted', { detail, bubbles: true, cancelable: true });
  iframe.dispatchEvent(event);
  const redirect = typeof data.redirectUrl === 'string' ? safeRedirectUrl(data.redirectUrl, window.location.href) : null;
  if (redirect && !event.defaultPrevented) window.location.assign(redirect);
}

function listen(iframe: HTMLIFrameElement, origin: string, formId: string): void {
  window.addEventListener('message', (event) => {
    if (event.source !== iframe.contentWindow || event.origin !== origin) return;
    const data: unknown = event.data;
    if (!data || typeof data !== 'object') return;
    const message = data as Record<string, unknown>;
    if (message.type === 'formservice:resize') {
      const height = message.height;
      if (typeof height === 'number' && Number.isFinite(height) && height > 0) {
        iframe.style.height = `${Math.min(Math.ceil(height), MAX_HEIGHT)}px`;
      }
    } else if (message.type === 'formservice:navigated') {
      if (iframe.getBoundingClientRect().top < 0) iframe.scrollIntoView({ block: 'start' });
    } else if (message.type === 'formservice:submitted') {
      announceSubmission(iframe, formId, message);
    }
  });
}

function embed(script: HTMLScriptElement): void {
  script.setAttribute(PROCESSED, '');
  const formId = script.getAttribute('data-form') || '';
  const origin = scriptOrigin(script);
  if (!FORM_ID.test(formId) || !origin) {
    console.error(`formservice embed: data-form must be a form id like "form_abc123" (got "${formId}")`);
    return;
  }
  const iframe = document.createElement('iframe');
  iframe.title = script.getAttribute('data-title') || 'Form';
  iframe.className = 'formservice-embed';
  iframe.setAttribute('width', '100%');
  iframe.style.border = '0';
  iframe.style.width = '100%';
  iframe.style.display = 'block';
  iframe.style.height = INITIAL_HEIGHT;
  // Wallets in Stripe's Payment Element (Apple Pay, Google Pay) need the Payment Request API in the frame.
  iframe.setAttribute('allow', 'payment *');
  listen(iframe, origin, formId);
  place(script, iframe);
  void prefillParameterNames(origin, formId).then((names) => {
    iframe.src = frameUrl(origin, formId, names, frameLanguage(script));
  });
}

function isEmbedScript(script: HTMLScriptElement): boolean {
  try {
    return new URL(script.src, window.location.href).pathname.endsWith('/embed.js');
  } catch {
    return false;
  }
}

function start(): void {
  const current = document.currentScript;
  if (current instanceof HTMLScriptElement && current.hasAttribute('data-form') && !current.hasAttribute(PROCESSED)) {
    embed(current);
  }
  // Tags inserted before this copy ran (several forms on a page, or script loaders) are picked up too.
  document.querySelectorAll<HTMLScriptElement>(`script[data-form]:not([${PROCESSED}])`).forEach((script) => {
    if (script.src && isEmbedScript(script)) embed(script);
  });
}

start();
