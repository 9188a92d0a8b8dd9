import type { EventHandlers, Method, Reply, Transport } from '../lib/api';

type Handler = (body: unknown, path: string) => Reply | Promise<Reply>;

/** A transport answering from a table of routes, recording every call. */
export class MockTransport implements Transport {
  calls: { method: Method; path: string; body: unknown }[] = [];
  handlers: EventHandlers | null = null;
  private routes: { method: Method; match: RegExp; handler: Handler }[] = [];

  on(method: Method, match: RegExp | string, handler: Handler): this;
  on(method: Method, match: RegExp | string, body: object, status?: number): this;
  on(method: Method, match: RegExp | string, handler: Handler | object, status = 200): this {
    const h: Handler =
      typeof handler === 'function' ? (handler as Handler) : () => ({ status, contentType: 'application/json', body: handler });
    const re = typeof match === 'string' ? new RegExp('^' + match.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '$') : match;
    this.routes.unshift({ method, match: re, handler: h });
    return this;
  }

  async request(method: Method, path: string, body?: unknown): Promise<Reply> {
    this.calls.push({ method, path, body });
    const r = this.routes.find((x) => x.method === method && x.match.test(path));
    if (!r) return { status: 404, contentType: 'application/json', body: { error: { code: 404, message: `no route ${path}` } } };
    return r.handler(body, path);
  }

  subscribe(h: EventHandlers): () => void {
    this.handlers = h;
    return () => (this.handlers = null);
  }

  paths(method?: Method): string[] {
    return this.calls.filter((c) => !method || c.method === method).map((c) => c.path);
  }
}

export const json = (status: number, body: unknown): Reply => ({ status, contentType: 'application/json', body });

export function turn(taskId: string, openedMs: number, extra: Record<string, unknown> = {}) {
  return {
    id: `turn-${taskId}`,
    taskId,
    agentId: 'inbox',
    source: 'served',
    state: 'input-required',
    preview: `Request ${taskId}`,
    openedMs,
    closedMs: null,
    outcome: null,
    ...extra,
  };
}

export const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));

/** A promise held until `open()`: for a reply that must answer late. */
export function gate(): { held: Promise<void>; open: () => void } {
  let open: () => void = () => {};
  const held = new Promise<void>((r) => (open = r));
  return { held, open };
}
