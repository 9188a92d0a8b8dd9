import { describe, expect, it } from 'vitest';
import { get } from 'svelte/store';
import { Api } from './api';
import { createApp, storageState } from './app';
import { MockTransport, json, tick } from '../test/mock';

describe('storage health', () => {
  it('follows storage notices and reads health again on a resync', async () => {
    const m = new MockTransport()
      .on('GET', /^\/api\/queue/, { items: [], counts: {} })
      .on('GET', '/api/health', () =>
        json(200, { ok: true, version: '0', storage: { kind: 'storage', ok: false, error: 'the commit failed (disk full)', sinceMs: 5 } }),
      );
    const app = createApp(new Api(m));
    expect(get(app.storage)).toEqual({ ok: true });

    app.dispatch({ kind: 'storage', ok: false, error: 'the commit failed (disk I/O error)', sinceMs: 42 });
    expect(get(app.storage)).toEqual({ ok: false, error: 'the commit failed (disk I/O error)', sinceMs: 42 });
    app.dispatch({ kind: 'storage', ok: true });
    expect(get(app.storage)).toEqual({ ok: true });

    // Missed while the stream was down: the health check says it.
    app.resync();
    await tick();
    expect(get(app.storage)).toEqual({ ok: false, error: 'the commit failed (disk full)', sinceMs: 5 });
  });

  it('reads anything but ok: false as ok', () => {
    expect(storageState({ kind: 'storage', ok: true })).toEqual({ ok: true });
    expect(storageState({})).toEqual({ ok: true });
    expect(storageState({ ok: false, error: 3 })).toEqual({ ok: false, error: undefined, sinceMs: undefined });
  });
});
