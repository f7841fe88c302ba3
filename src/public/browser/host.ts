// The hosted page's side of the embed protocol: it tells the embedding page (embed.ts) its height,
// page changes and completion. Payloads hold nothing secret, so any parent may read them.
export interface HostBridge {
  submitted(formId: string, submissionId: string, redirectUrl: string | null): void;
  navigated(): void;
}

export function connectToHost(): HostBridge | null {
  if (new URLSearchParams(window.location.search).get('embed') !== '1' || window.parent === window) return null;
  document.documentElement.setAttribute('data-embed', '');
  const post = (message: Record<string, unknown>): void => window.parent.postMessage(message, '*');

  let reported = -1;
  const reportHeight = (): void => {
    const height = Math.ceil(document.documentElement.getBoundingClientRect().height);
    if (height === reported) return;
    reported = height;
    post({ type: 'formservice:resize', height });
  };
  new ResizeObserver(reportHeight).observe(document.documentElement);
  reportHeight();

  return {
    submitted: (formId, submissionId, redirectUrl) =>
      post({ type: 'formservice:submitted', formId, submissionId, redirectUrl }),
    navigated: () => post({ type: 'formservice:navigated' }),
  };
}
