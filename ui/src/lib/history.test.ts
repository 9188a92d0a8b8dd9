import { describe, expect, it } from 'vitest';
import { get } from 'svelte/store';
import { Api } from './api';
import { createHistory } from './history';
import { MockTransport, json, tick } from '../test/mock';

describe('history store', () => {
  it('filters, pages and exports with the same filters', async () => {
    const m = new MockTransport()
      .on('GET', /^\/api\/history\?/, (_b, path) =>
        json(200, path.includes('cursor') ? { items: [{ decision: { id: 'd2' } }] } : { items: [{ decision: { id: 'd1' } }], nextCursor: 'n1' }),
      )
      .on('GET', /^\/api\/history\/export/, () => ({ status: 200, contentType: 'text/csv', body: null, blob: new Blob(['x']) }));
    const h = createHistory(new Api(m));
    await h.setFilter({ agent: 'ops', q: 'invoice' });
    await h.loadMore();
    expect(get(h).items.map((i) => i.decision.id)).toEqual(['d1', 'd2']);
    const out = await h.exportAs('csv');
    expect(out.filename).toBe('countersign-history.csv');
    expect(m.paths()).toEqual([
      '/api/history?agent=ops&q=invoice&limit=200',
      '/api/history?agent=ops&q=invoice&limit=200&cursor=n1',
      '/api/history/export?format=csv&agent=ops&q=invoice',
    ]);
  });

  it('a refresh brings in new decisions and keeps the pages loaded with "more"', async () => {
    // A server of 250 decisions (ids d249 … d0, newest first) in pages of 200.
    let newest = 249;
    const ids = (from: number, n: number) =>
      Array.from({ length: n }, (_, i) => from - i)
        .filter((k) => k >= 0)
        .map((k) => ({ decision: { id: `d${k}` } }));
    const m = new MockTransport().on('GET', /^\/api\/history\?/, (_b, path) => {
      const c = /cursor=d(\d+)/.exec(path);
      const from = c ? Number(c[1]) - 1 : newest;
      const items = ids(from, 200);
      const last = items[items.length - 1]?.decision.id;
      return json(200, { items, nextCursor: last !== 'd0' ? last : undefined });
    });
    const h = createHistory(new Api(m));
    await h.load();
    await h.loadMore();
    expect(get(h).items).toHaveLength(250);
    expect(get(h).nextCursor).toBeNull();
    h.move(230); // on d19, in the second page
    expect(get(h).items[get(h).cursor].decision.id).toBe('d19');

    // Three decisions made elsewhere.
    newest = 252;
    await h.refresh();
    const s = get(h);
    expect(s.items).toHaveLength(253);
    expect(s.items.slice(0, 4).map((i) => i.decision.id)).toEqual(['d252', 'd251', 'd250', 'd249']);
    expect(s.items[252].decision.id).toBe('d0');
    expect(new Set(s.items.map((i) => i.decision.id)).size).toBe(253);
    expect(s.nextCursor).toBeNull();
    expect(s.items[s.cursor].decision.id).toBe('d19');

    // More new decisions than a page: the loaded pages cannot be joined
    // to the fresh one, so the list starts over from it.
    newest = 600;
    await h.refresh();
    const t = get(h);
    expect(t.items).toHaveLength(200);
    expect(t.items[0].decision.id).toBe('d600');
    expect(t.nextCursor).toBe('d401');
    expect(t.cursor).toBe(199);
  });

  it('a refresh asked for while a filter is loading waits for it', async () => {
    let release: () => void = () => {};
    let holding = true;
    const m = new MockTransport().on('GET', /^\/api\/history\?/, async (_b, path) => {
      const ops = path.includes('agent=ops');
      if (ops && holding) {
        holding = false;
        await new Promise<void>((r) => (release = r));
      }
      const items = ops ? ['ops2', 'ops1'] : ['all3', 'ops2', 'all2', 'ops1', 'all1'];
      return json(200, { items: items.map((id) => ({ decision: { id } })), nextCursor: 'more' });
    });
    const h = createHistory(new Api(m));
    await h.load();
    const filtered = h.setFilter({ agent: 'ops' });
    const refreshed = h.refresh();
    await tick(10);
    expect(get(h).items.map((i) => i.decision.id)).toEqual(['all3', 'ops2', 'all2', 'ops1', 'all1']);
    release();
    await filtered;
    await refreshed;
    expect(get(h).items.map((i) => i.decision.id)).toEqual(['ops2', 'ops1']);
  });

  it('a refresh answered after the filters changed is dropped', async () => {
    let release: () => void = () => {};
    const m = new MockTransport().on('GET', /^\/api\/history\?/, async (_b, path) => {
      if (!path.includes('agent=ops')) await new Promise<void>((r) => (release = r));
      return json(200, { items: [{ decision: { id: path.includes('agent=ops') ? 'ops1' : 'all1' } }] });
    });
    const h = createHistory(new Api(m));
    const late = h.refresh();
    await h.setFilter({ agent: 'ops' });
    release();
    await late;
    expect(get(h).items.map((i) => i.decision.id)).toEqual(['ops1']);
  });
});

