import { describe, expect, it } from 'vitest';
import { get } from 'svelte/store';
import { Api } from './api';
import { createQueue, REFRESH_DEBOUNCE_MS } from './queue';
import { MockTransport, gate, json, tick, turn } from '../test/mock';

function server(items: ReturnType<typeof turn>[]) {
  const state = { items };
  const answer = (path: string) => {
    const u = new URL(path, 'http://x');
    const st = u.searchParams.get('state');
    const limit = Number(u.searchParams.get('limit') ?? 50);
    const cursor = Number(u.searchParams.get('cursor') ?? 0);
    const q = u.searchParams.get('q');
    let list = state.items.filter((t) => (!st || t.state === st) && (!q || t.preview.includes(q)));
    // As the server: by parking time, then by when the turn was stored
    // (the mock's ids sort in that order).
    list = [...list].sort((a, b) => a.openedMs - b.openedMs || (a.id < b.id ? -1 : 1));
    if (u.searchParams.get('sort') === 'newest') list.reverse();
    const page = list.slice(cursor, cursor + limit);
    const counts: Record<string, number> = {};
    for (const t of state.items) counts[t.agentId] = (counts[t.agentId] ?? 0) + 1;
    return json(200, {
      items: page,
      total: list.length,
      counts,
      ...(cursor + limit < list.length ? { nextCursor: String(cursor + limit) } : {}),
    });
  };
  const m = new MockTransport().on('GET', /^\/api\/queue/, (_b, path) => answer(path));
  return { m, state, answer };
}

describe('queue store', () => {
  it('loads parked turns with counts per agent and per state', async () => {
    const { m } = server([turn('a', 1), turn('b', 2, { agentId: 'ops', state: 'auth-required' })]);
    const q = createQueue(new Api(m));
    await q.load();
    const s = get(q);
    expect(s.items.map((t) => t.taskId)).toEqual(['b', 'a']);
    expect(s.total).toBe(2);
    expect(s.counts).toEqual({ inbox: 1, ops: 1 });
    expect(s.stateCounts).toEqual({ 'input-required': 1, 'auth-required': 1 });
  });

  it('pages in more rows without duplicates', async () => {
    const items = Array.from({ length: 1200 }, (_, i) => turn(`t${i}`, i));
    const { m } = server(items);
    const q = createQueue(new Api(m));
    await q.setFilter({ sort: 'oldest' });
    expect(get(q).items).toHaveLength(500);
    await q.loadMore();
    await q.loadMore();
    await q.loadMore();
    const s = get(q);
    expect(s.items).toHaveLength(1200);
    expect(new Set(s.items.map((t) => t.taskId)).size).toBe(1200);
    expect(s.nextCursor).toBeNull();
  });

  it('shows a newly parked task live and drops one decided elsewhere', async () => {
    const { m, state } = server([turn('a', 1), turn('b', 2)]);
    const q = createQueue(new Api(m));
    await q.load();
    state.items = [...state.items, turn('c', 3)];
    q.onEvent({ taskId: 'c', seq: 1, kind: 'task', state: 'TASK_STATE_INPUT_REQUIRED' });
    await tick(REFRESH_DEBOUNCE_MS + 20);
    expect(get(q).items.map((t) => t.taskId)).toEqual(['c', 'b', 'a']);
    expect(get(q).total).toBe(3);
    q.onEvent({ taskId: 'b', seq: 4, kind: 'statusUpdate', state: 'TASK_STATE_COMPLETED' });
    expect(get(q).items.map((t) => t.taskId)).toEqual(['c', 'a']);
    expect(get(q).total).toBe(2);
    expect(get(q).counts).toEqual({ inbox: 3 - 1 });
  });

  it('a task parked in the same millisecond as one shown takes the place the server gives it', async () => {
    const { m, state } = server([turn('x1', 5)]);
    const q = createQueue(new Api(m));
    await q.load();
    q.focusTask('x1');
    state.items.push(turn('x2', 5), turn('x3', 5));
    q.onEvent({ taskId: 'x2', seq: 1, kind: 'task', state: 'TASK_STATE_INPUT_REQUIRED' });
    await tick(REFRESH_DEBOUNCE_MS + 20);
    expect(get(q).items.map((t) => t.taskId)).toEqual(['x3', 'x2', 'x1']);
    expect(q.focused()?.taskId).toBe('x1');
    // A full re-read agrees: the focused row does not move under the cursor.
    await q.resync();
    expect(get(q).items.map((t) => t.taskId)).toEqual(['x3', 'x2', 'x1']);
    expect(get(q).cursor).toBe(2);
  });

  it('a search starts on its first row even when a re-read of the head lands before it', async () => {
    const { m, state, answer } = server([turn('old1', 1, { preview: 'Leftover 1' }), turn('old2', 2, { preview: 'Leftover 2' })]);
    const q = createQueue(new Api(m));
    await q.load();
    expect(q.focused()?.taskId).toBe('old2');
    // The search's page is slow; the re-read an event asked for is not.
    const { held, open: release } = gate();
    let holding = true;
    m.on('GET', /^\/api\/queue\?.*q=Triage/, async (_b, path) => {
      if (holding && !path.includes('state=')) {
        holding = false;
        await held;
      }
      return answer(path);
    });
    state.items.push(...[3, 4, 5].map((n) => turn(`t${n}`, n, { preview: `Triage ${n}` })));
    q.onEvent({ taskId: 't3', seq: 1, kind: 'task', state: 'TASK_STATE_INPUT_REQUIRED' });
    const searched = q.setFilter({ q: 'Triage' });
    await tick(REFRESH_DEBOUNCE_MS + 20);
    // The old filter's rows are shown until the search lands, unmixed.
    expect(get(q).items.map((t) => t.taskId)).toEqual(['old2', 'old1']);
    release();
    await searched;
    await tick(20);
    expect(get(q).items.map((t) => t.taskId)).toEqual(['t5', 't4', 't3']);
    expect(q.focused()?.taskId).toBe('t5');
    q.move(1);
    expect(q.focused()?.taskId).toBe('t4');
  });

  it('gathers a burst of events into one re-read', async () => {
    const { m, state } = server([]);
    const q = createQueue(new Api(m));
    await q.load();
    const before = m.calls.length;
    for (let i = 0; i < 20; i++) {
      state.items.push(turn(`n${i}`, i));
      q.onEvent({ taskId: `n${i}`, seq: 1, kind: 'task', state: 'TASK_STATE_INPUT_REQUIRED' });
    }
    await tick(REFRESH_DEBOUNCE_MS + 20);
    expect(get(q).items).toHaveLength(20);
    // One page plus the two state totals.
    expect(m.calls.length - before).toBe(3);
  });

  it('keeps the focused task focused when rows arrive above it, and after a resync', async () => {
    const { m, state } = server([turn('a', 1), turn('b', 2)]);
    const q = createQueue(new Api(m));
    await q.load();
    q.focusTask('a');
    expect(q.focused()?.taskId).toBe('a');
    state.items.push(turn('c', 3));
    q.onEvent({ taskId: 'c', seq: 1, kind: 'task', state: 'TASK_STATE_INPUT_REQUIRED' });
    await tick(REFRESH_DEBOUNCE_MS + 20);
    expect(q.focused()?.taskId).toBe('a');
    await q.resync();
    expect(get(q).items.map((t) => t.taskId)).toEqual(['c', 'b', 'a']);
  });

  it('a row focused while a new sort is loading stays focused when the page lands', async () => {
    const { m, state } = server([turn('a', 1), turn('b', 2), turn('c', 3)]);
    const q = createQueue(new Api(m));
    await q.load();
    expect(get(q).items.map((t) => t.taskId)).toEqual(['c', 'b', 'a']);
    // The oldest-first page is slow; the old rows stay on screen meanwhile.
    let hold: (() => void) | null = null;
    const oldest = [...state.items].sort((x, y) => x.openedMs - y.openedMs);
    const page = json(200, { items: oldest, total: 3, counts: { inbox: 3 } });
    m.on('GET', /sort=oldest/, () => (hold ? page : new Promise((r) => (hold = () => r(page)))));
    const sorting = q.setFilter({ sort: 'oldest' });
    await tick();
    // The person clicks the row of "c", still first on screen.
    q.focusTask('c');
    expect(get(q).cursor).toBe(0);
    (hold as unknown as () => void)();
    await sorting;
    expect(get(q).items.map((t) => t.taskId)).toEqual(['a', 'b', 'c']);
    expect(q.focused()?.taskId).toBe('c');
    // A filter change nobody pointed into starts at the top.
    await q.setFilter({ sort: 'newest' });
    expect(get(q).cursor).toBe(0);
    expect(q.focused()?.taskId).toBe('c');
    await q.setFilter({ sort: 'oldest' });
    expect(q.focused()?.taskId).toBe('a');
  });

  it('moves, selects and decides in bulk with one result per task', async () => {
    const { m } = server([turn('a', 1), turn('b', 2), turn('c', 3)]);
    m.on('POST', '/api/tasks/a/decision', { decision: { id: 'd1', kind: 'approve', delivery: 'delivered' } })
      .on('POST', '/api/tasks/b/decision', () =>
        json(409, { error: { message: 'already decided: reject by cli' }, decision: { id: 'd0', kind: 'reject', actor: 'cli' } }),
      )
      .on('POST', '/api/tasks/c/decision', () => json(500, { error: { message: 'storage failure' } }));
    const q = createQueue(new Api(m));
    await q.load();
    q.move(1);
    expect(q.focused()?.taskId).toBe('b');
    q.move(-5);
    expect(q.focused()?.taskId).toBe('c');
    q.selectAll();
    expect(get(q).selected.size).toBe(3);
    const results = await q.decideMany(['a', 'b', 'c'], { kind: 'approve', text: 'ok' });
    const by = Object.fromEntries(results.map((r) => [r.taskId, r.outcome]));
    expect(by).toEqual({ a: 'ok', b: 'already', c: 'error' });
    expect(results.find((r) => r.taskId === 'c')?.message).toBe('storage failure');
    // Decided and already-decided rows leave; the failed one stays, selected.
    const s = get(q);
    expect(s.items.map((t) => t.taskId)).toEqual(['c']);
    expect([...s.selected]).toEqual(['c']);
    expect(s.bulk?.running).toBe(false);
    const posts = m.calls.filter((c) => c.method === 'POST');
    expect(posts.map((c) => c.body)).toEqual([
      { kind: 'approve', text: 'ok' },
      { kind: 'approve', text: 'ok' },
      { kind: 'approve', text: 'ok' },
    ]);
  });

  it('a page read before a task left does not bring it back', async () => {
    const { m, state } = server([turn('a', 1), turn('b', 2)]);
    let hold: (() => void) | null = null;
    const q = createQueue(new Api(m));
    await q.load();
    // The next queue read is slow and answers with the old state.
    const old = [...state.items, turn('c', 3)];
    m.on('GET', /^\/api\/queue\?sort/, () => new Promise((r) => (hold = () => r(json(200, { items: old, total: 3, counts: { inbox: 3 } })))));
    state.items.push(turn('c', 3));
    q.onEvent({ taskId: 'c', seq: 1, kind: 'task', state: 'TASK_STATE_INPUT_REQUIRED' });
    await tick(REFRESH_DEBOUNCE_MS + 20);
    // Meanwhile b is decided and leaves.
    q.onEvent({ taskId: 'b', seq: 5, kind: 'statusUpdate', state: 'TASK_STATE_COMPLETED' });
    hold!();
    await tick(10);
    expect(get(q).items.map((t) => t.taskId)).toEqual(['c', 'a']);
    // Parked again later, it comes back.
    m.on('GET', /^\/api\/queue\?sort/, { items: [turn('b', 9), turn('c', 3), turn('a', 1)], total: 3, counts: { inbox: 3 } });
    q.onEvent({ taskId: 'b', seq: 9, kind: 'task', state: 'TASK_STATE_INPUT_REQUIRED' });
    await tick(REFRESH_DEBOUNCE_MS + 20);
    expect(get(q).items.map((t) => t.taskId)).toEqual(['b', 'c', 'a']);
  });

  it('reports a failed load and recovers', async () => {
    const m = new MockTransport().on('GET', /^\/api\/queue/, () => json(0, null));
    const q = createQueue(new Api(m));
    await q.load();
    expect(get(q).error).toBe('Countersign cannot be reached');
    m.on('GET', /^\/api\/queue/, { items: [turn('a', 1)], total: 1, counts: { inbox: 1 } });
    await q.load();
    expect(get(q).error).toBeNull();
    expect(get(q).items).toHaveLength(1);
  });
});
