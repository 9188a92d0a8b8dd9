import { describe, expect, it, vi } from 'vitest';
import { Api, Dedupe, HttpTransport, SseParser, TauriTransport, takeToken } from './api';
import { MockTransport, json } from '../test/mock';

function response(body: string | ReadableStream<Uint8Array>, init: ResponseInit & { type?: string } = {}) {
  return new Response(body, { status: init.status ?? 200, headers: { 'content-type': init.type ?? 'application/json' } });
}

describe('HttpTransport', () => {
  it('sends the bearer token to the UI API and JSON bodies', async () => {
    const fetchFn = vi.fn(async () => response('{"decision":{"id":"d1"}}'));
    const t = new HttpTransport('tok-123', 'http://h', fetchFn as unknown as typeof fetch);
    const r = await t.request('POST', '/api/tasks/a/decision', { kind: 'approve' });
    expect(r).toMatchObject({ status: 200, body: { decision: { id: 'd1' } } });
    const [url, init] = fetchFn.mock.calls[0] as unknown as [string, RequestInit];
    expect(url).toBe('http://h/api/tasks/a/decision');
    expect(init.method).toBe('POST');
    expect((init.headers as Record<string, string>).Authorization).toBe('Bearer tok-123');
    expect((init.headers as Record<string, string>)['Content-Type']).toBe('application/json');
    expect(init.body).toBe('{"kind":"approve"}');
  });

  it('never sends the token outside /api/ (agent cards are public)', async () => {
    const fetchFn = vi.fn(async () => response('{"name":"Inbox"}'));
    const t = new HttpTransport('tok', '', fetchFn as unknown as typeof fetch);
    await t.request('GET', '/a2a/inbox/.well-known/agent-card.json');
    const init = (fetchFn.mock.calls[0] as unknown as [string, RequestInit])[1];
    expect((init.headers as Record<string, string>).Authorization).toBeUndefined();
  });

  it('returns non-JSON answers as blobs and a network failure as status 0', async () => {
    const t = new HttpTransport('tok', '', (async () => response('a,b\n1,2\n', { type: 'text/csv' })) as unknown as typeof fetch);
    const r = await t.request('GET', '/api/history/export?format=csv');
    expect(r.blob).toBeInstanceOf(Blob);
    expect(await r.blob?.text()).toBe('a,b\n1,2\n');
    const down = new HttpTransport('tok', '', (async () => {
      throw new TypeError('connection refused');
    }) as unknown as typeof fetch);
    expect((await down.request('GET', '/api/health')).status).toBe(0);
  });

  it('reads the event stream, drops duplicates and resyncs on each connect, the first included', async () => {
    vi.useFakeTimers();
    const enc = new TextEncoder();
    const streams = [
      'data: {"taskId":"t1","seq":1,"kind":"task","state":"TASK_STATE_INPUT_REQUIRED"}\n\n:keep-alive\n\ndata: {"taskId":"t1","seq":1,"kind":"task","state":"TASK_STATE_INPUT_REQUIRED"}\n\n',
      'data: {"taskId":"t1","seq":1,"kind":"task","state":"TASK_STATE_INPUT_REQUIRED"}\r\n\r\ndata: {"taskId":"t1","seq":2,"kind":"statusUpdate","state":"TASK_STATE_COMPLETED"}\n\n',
    ];
    let n = 0;
    const fetchFn = vi.fn(async (_url: string, init: RequestInit) => {
      expect((init.headers as Record<string, string>).Authorization).toBe('Bearer tok');
      const text = streams[n++] ?? '';
      if (!text) return new Promise<Response>(() => {});
      return response(
        new ReadableStream({
          start(c) {
            // Split mid-event: the parser must join chunks.
            c.enqueue(enc.encode(text.slice(0, 17)));
            c.enqueue(enc.encode(text.slice(17)));
            c.close();
          },
        }),
        { type: 'text/event-stream' },
      );
    });
    const t = new HttpTransport('tok', '', fetchFn as unknown as typeof fetch);
    const events: unknown[] = [];
    const resync = vi.fn();
    const status: boolean[] = [];
    const stop = t.subscribe({ onEvent: (e) => events.push(e), onResync: resync, onStatus: (c) => status.push(c) });
    await vi.advanceTimersByTimeAsync(0);
    expect(events).toHaveLength(1);
    // The app's first read raced the stream's opening: read again.
    expect(resync).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(600);
    expect(resync).toHaveBeenCalledTimes(2);
    expect(events).toEqual([
      { taskId: 't1', seq: 1, kind: 'task', state: 'TASK_STATE_INPUT_REQUIRED' },
      { taskId: 't1', seq: 2, kind: 'statusUpdate', state: 'TASK_STATE_COMPLETED' },
    ]);
    expect(status).toEqual([true, false, true, false]);
    stop();
    vi.useRealTimers();
  });
});

describe('SseParser and Dedupe', () => {
  it('joins multi-line data and ignores comments and other fields', () => {
    const p = new SseParser();
    expect(p.push('id: 4\nevent: x\ndata: {"a":\ndata: 1}\n')).toEqual([]);
    expect(p.push('\n: ping\n\ndata:{"b":2}\n\n')).toEqual(['{"a":\n1}', '{"b":2}']);
  });

  it('lets an event through once per task and seq', () => {
    const d = new Dedupe(2);
    expect(d.fresh({ taskId: 'a', seq: 1, kind: 'task' })).toBe(true);
    expect(d.fresh({ taskId: 'a', seq: 1, kind: 'task' })).toBe(false);
    expect(d.fresh({ taskId: 'b', seq: 1, kind: 'task' })).toBe(true);
    expect(d.fresh({ kind: 'chain' })).toBe(true);
    expect(d.fresh({ kind: 'chain' })).toBe(true);
  });
});

describe('TauriTransport', () => {
  it('calls the api command and decodes binary answers', async () => {
    const invoke = vi.fn(async (_cmd: string, args: Record<string, unknown>) =>
      args.path === '/api/x'
        ? { status: 200, contentType: 'text/csv', body: { base64: btoa('a,b') } }
        : { status: 409, contentType: 'application/json', body: { error: { message: 'already decided' } } },
    );
    const listen = vi.fn(async () => () => {});
    const t = new TauriTransport(invoke, listen);
    const csv = await t.request('GET', '/api/x');
    expect(await csv.blob?.text()).toBe('a,b');
    expect(invoke).toHaveBeenCalledWith('api', { method: 'GET', path: '/api/x', body: null });
    const api = new Api(t);
    await expect(api.health()).rejects.toThrow('already decided');
  });

  it('delivers api-event payloads once, and resyncs once listening', async () => {
    let cb: ((e: { payload: unknown }) => void) | null = null;
    const t = new TauriTransport(vi.fn(), async (_n, c) => {
      cb = c;
      return () => {};
    });
    const events: unknown[] = [];
    const resync = vi.fn();
    t.subscribe({ onEvent: (e) => events.push(e), onResync: resync });
    expect(resync).not.toHaveBeenCalled();
    await Promise.resolve();
    await Promise.resolve();
    expect(resync).toHaveBeenCalledTimes(1);
    cb!({ payload: { taskId: 'a', seq: 3, kind: 'task' } });
    cb!({ payload: { taskId: 'a', seq: 3, kind: 'task' } });
    expect(events).toHaveLength(1);
  });
});

describe('Api', () => {
  it('tells a decision taken, already decided, and failed apart', async () => {
    const m = new MockTransport()
      .on('POST', '/api/tasks/ok/decision', { decision: { id: 'd', kind: 'approve', delivery: 'delivered' } })
      .on('POST', '/api/tasks/dup/decision', () =>
        json(409, { error: { code: 409, message: 'already decided: approve by cli' }, decision: { id: 'd0', kind: 'approve', actor: 'cli' } }),
      )
      .on('POST', '/api/tasks/bad/decision', () => json(400, { error: { code: 400, message: 'invalid decision' } }));
    const api = new Api(m);
    expect(await api.decide('ok', { kind: 'approve' })).toMatchObject({ ok: true, decision: { id: 'd' } });
    expect(await api.decide('dup', { kind: 'approve' })).toMatchObject({
      ok: false,
      alreadyDecided: true,
      decision: { actor: 'cli' },
    });
    expect(await api.decide('bad', { kind: 'approve' })).toMatchObject({ ok: false, alreadyDecided: false, status: 400, message: 'invalid decision' });
  });

  it('builds queue queries and escapes ids', async () => {
    const m = new MockTransport().on('GET', /^\/api\/queue/, { items: [], total: 0, counts: {} }).on('GET', /^\/api\/tasks\//, {});
    const api = new Api(m);
    await api.queue({ agent: 'ops', q: 'pay 10%', sort: 'oldest', state: '' });
    await api.task('a/b?c');
    expect(m.paths()).toEqual(['/api/queue?agent=ops&q=pay+10%25&sort=oldest', '/api/tasks/a%2Fb%3Fc']);
  });
});

describe('takeToken', () => {
  it('moves the token from the fragment to session storage', () => {
    const store = new Map<string, string>();
    const storage = { getItem: (k: string) => store.get(k) ?? null, setItem: (k: string, v: string) => void store.set(k, v) } as unknown as Storage;
    const replace = vi.fn();
    const loc = { hash: '#token=abc%2Ddef', pathname: '/', search: '' } as Location;
    expect(takeToken(loc, storage, { replaceState: replace } as unknown as History)).toBe('abc-def');
    expect(replace).toHaveBeenCalledWith(null, '', '/#/queue');
    const later = { hash: '#/history', pathname: '/', search: '' } as Location;
    expect(takeToken(later, storage, { replaceState: replace } as unknown as History)).toBe('abc-def');
  });
});
