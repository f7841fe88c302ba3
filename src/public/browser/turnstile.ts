// Invisible Turnstile challenge, using only the documented render/execute/reset/getResponse API.
import { scriptGlobal } from './dom';
interface TurnstileApi {
  render(container: HTMLElement, params: Record<string, unknown>): string | undefined;
  execute(container: HTMLElement): void;
  reset(widgetId?: string): void;
  getResponse(widgetId?: string): string | undefined;
}

declare global {
  interface Window { turnstile?: TurnstileApi }
}

export interface Challenge {
  /** A fresh token; runs the challenge when none is waiting. */
  token(): Promise<string>;
  /** Tokens are single-use: call after every submission attempt. */
  reset(): void;
}

const SCRIPT_ID = 'fs-turnstile-script';
const LOAD_TIMEOUT_MS = 15000;
const SOLVE_TIMEOUT_MS = 60000;

function loadApi(): Promise<TurnstileApi> {
  return scriptGlobal(SCRIPT_ID, () => window.turnstile, 'challenge script', LOAD_TIMEOUT_MS);
}

export function createChallenge(container: HTMLElement, siteKey: string): Challenge {
  let waiting: { resolve(token: string): void; reject(error: Error): void } | null = null;
  const settle = (outcome: { token: string } | { error: Error }): void => {
    const current = waiting;
    waiting = null;
    if (!current) return;
    if ('token' in outcome) current.resolve(outcome.token);
    else current.reject(outcome.error);
  };

  const widget = loadApi().then((api) => {
    const id = api.render(container, {
      sitekey: siteKey,
      execution: 'execute',
      appearance: 'interaction-only',
      callback: (token: string) => settle({ token }),
      'error-callback': () => {
        settle({ error: new Error('challenge failed') });
        return true;
      },
      'expired-callback': () => api.reset(id),
    });
    return { api, id };
  });
  // The page may never be submitted: keep an early load failure from being an unhandled rejection.
  widget.catch(() => undefined);

  return {
    async token() {
      const { api, id } = await widget;
      const existing = api.getResponse(id);
      if (existing) return existing;
      return new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => settle({ error: new Error('challenge timed out') }), SOLVE_TIMEOUT_MS);
        waiting = {
          resolve: (token) => { clearTimeout(timer); resolve(token); },
          reject: (error) => { clearTimeout(timer); reject(error); },
        };
        api.execute(container);
      });
    },
    reset() {
      widget.then(({ api, id }) => api.reset(id)).catch(() => undefined);
    },
  };
}
