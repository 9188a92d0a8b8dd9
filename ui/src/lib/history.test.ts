import { describe, expect, it } from 'vitest';
import { get } from 'svelte/store';
import { Api } from './api';
import { createHistory } from './history';
import { MockTransport, json } from '../test/mock';

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
});
