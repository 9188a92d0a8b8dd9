import { describe, expect, it } from 'vitest';
import { get } from 'svelte/store';
import { Api } from './api';
import { createApp, parseRoute, routeHash } from './app';
import { createTasks } from './tasks';
import { MockTransport, gate, json, tick } from '../test/mock';

const row = (id: string, state = 'completed') => ({ id, agentId: 'ops', state, preview: id, updatedMs: 1, parked: false });

describe('recent tasks store', () => {
  it('narrows by agent and pages on with the same filter', async () => {
    const m = new MockTransport().on('GET', /^\/api\/tasks\?/, (_b, path) =>
      json(200, path.includes('cursor') ? { items: [row('t1')] } : { items: [row('t2')], nextCursor: 'c1' }),
    );
    const t = createTasks(new Api(m));
    await t.setFilter({ agent: 'ops', state: 'failed' });
    await t.loadMore();
    await t.loadMore(); // the last page: nothing more is asked
    expect(get(t).items.map((x) => x.id)).toEqual(['t2', 't1']);
    await t.setFilter({ agent: '' });
    expect(m.paths()).toEqual([
      '/api/tasks?agent=ops&state=failed&limit=200',
      '/api/tasks?agent=ops&state=failed&limit=200&cursor=c1',
      '/api/tasks?state=failed&limit=200',
    ]);
  });

  it('searches by words, and reads on from a page that found nothing', async () => {
    const m = new MockTransport().on('GET', /^\/api\/tasks\?/, (_b, path) =>
      json(
        200,
        path.includes('cursor')
          ? { items: [row('t9')], searched: 3 }
          : { items: [], nextCursor: 'c5000', searched: 5000 },
      ),
    );
    const t = createTasks(new Api(m));
    await t.setFilter({ q: 'rotate keys' });
    expect(get(t).items).toEqual([]);
    expect(get(t).nextCursor).toBe('c5000');
    await t.loadMore();
    expect(get(t).items.map((x) => x.id)).toEqual(['t9']);
    expect(get(t).nextCursor).toBeNull();
    await t.setFilter({ q: '' });
    expect(m.paths()).toEqual([
      '/api/tasks?q=rotate+keys&limit=200',
      '/api/tasks?q=rotate+keys&limit=200&cursor=c5000',
      '/api/tasks?limit=200',
    ]);
  });

  it('a task that changed moves to the top once, and the cursor stays on its row', async () => {
    // 300 tasks (t299 … t0, newest change first) in pages of 200.
    let order = Array.from({ length: 300 }, (_, i) => `t${299 - i}`);
    const m = new MockTransport().on('GET', /^\/api\/tasks\?/, (_b, path) => {
      const c = /cursor=(t\d+)/.exec(path);
      const from = c ? order.indexOf(c[1]) + 1 : 0;
      const items = order.slice(from, from + 200).map((id) => row(id));
      const more = from + 200 < order.length;
      return json(200, { items, nextCursor: more ? items[items.length - 1].id : undefined });
    });
    const t = createTasks(new Api(m));
    await t.load();
    await t.loadMore();
    expect(get(t).items).toHaveLength(300);
    t.move(250); // on t49, in the second page
    // t10, in the second page, changes: it is now the newest.
    order = ['t10', ...order.filter((id) => id !== 't10')];
    await t.refresh();
    const s = get(t);
    expect(s.items).toHaveLength(300);
    expect(s.items[0].id).toBe('t10');
    expect(new Set(s.items.map((x) => x.id)).size).toBe(300);
    expect(s.items[s.cursor].id).toBe('t49');
  });
});

describe('the Tasks screen', () => {
  it('has a route of its own', () => {
    expect(parseRoute('#/tasks')).toEqual({ screen: 'tasks' });
    expect(routeHash({ screen: 'tasks' })).toBe('#/tasks');
  });

  it('an event about a task refreshes the list once it was opened, a burst of them once', async () => {
    const m = new MockTransport().on('GET', /^\/api\/tasks\?/, () => json(200, { items: [row('t1')] }));
    const app = createApp(new Api(m));
    app.dispatch({ kind: 'statusUpdate', taskId: 't1', state: 'TASK_STATE_COMPLETED' });
    await tick(400);
    expect(m.paths()).toEqual([]);
    await app.tasks.load();
    for (let i = 0; i < 5; i++) app.dispatch({ kind: 'statusUpdate', taskId: `t${i}`, state: 'TASK_STATE_WORKING' });
    await tick(400);
    expect(m.paths()).toEqual(['/api/tasks?limit=200', '/api/tasks?limit=200']);
  });

  it('a task that changes while the first page is read is not lost', async () => {
    // The server answers the first page from before the new task; its
    // event arrives before that answer does.
    const first = gate();
    let rows = [row('t1')];
    const m = new MockTransport().on('GET', /^\/api\/tasks\?/, async () => {
      const page = { items: rows };
      if (m.calls.length === 1) await first.held;
      return json(200, page);
    });
    const app = createApp(new Api(m));
    const loading = app.tasks.load();
    rows = [row('t2', 'input-required'), row('t1')];
    app.dispatch({ kind: 'statusUpdate', taskId: 't2', state: 'TASK_STATE_INPUT_REQUIRED' });
    first.open();
    await loading;
    expect(get(app.tasks).items.map((x) => x.id)).toEqual(['t1']);
    await tick(400);
    expect(get(app.tasks).items.map((x) => x.id)).toEqual(['t2', 't1']);
  });
});
