import { describe, expect, it } from 'vitest';
import { get } from 'svelte/store';
import { Api } from './api';
import { createTask } from './task';
import { MockTransport, gate, json, tick, turn } from '../test/mock';

function detail(id: string, parked = true) {
  return {
    task: { id, contextId: 'ctx', status: { state: parked ? 'TASK_STATE_INPUT_REQUIRED' : 'TASK_STATE_COMPLETED' } },
    agentId: 'inbox',
    dialect: 'v1',
    turns: [turn(id, 1)],
    decisions: [],
    ...(parked ? { openTurn: turn(id, 1) } : {}),
    rendered: { history: [], status: { state: 'input-required', message: null }, artifacts: [] },
  };
}

describe('task store', () => {
  it('tells a task the server does not have from a read that failed', async () => {
    let status = 500;
    const m = new MockTransport().on('GET', '/api/tasks/t1', () => json(status, { error: { message: 'busy' } }));
    const t = createTask(new Api(m));
    await t.open('t1');
    expect(get(t).error).toBe('busy');
    expect(get(t).gone).toBe(false);
    status = 404;
    await t.reload();
    expect(get(t).gone).toBe(true);
    status = 200;
    m.on('GET', '/api/tasks/t1', () => json(200, detail('t1')));
    await t.reload();
    expect(get(t).gone).toBe(false);
    expect(get(t).error).toBeNull();
  });

  it('reads a task that is not here from the archive, and says gone only when neither has it', async () => {
    let archived = true;
    const m = new MockTransport()
      .on('GET', '/api/tasks/t1', () => json(404, { error: { message: 'no task' } }))
      .on('GET', '/api/archives/tasks/t1', () =>
        archived
          ? json(200, { ...detail('t1', false), archivedAt: '2026-11-01T00:00:00Z' })
          : json(404, { error: { message: 'not in the archive either' } }),
      );
    const t = createTask(new Api(m));
    await t.open('t1');
    expect(get(t).detail?.archivedAt).toBe('2026-11-01T00:00:00Z');
    expect(get(t).gone).toBe(false);
    expect(get(t).error).toBeNull();
    archived = false;
    await t.reload();
    expect(get(t).gone).toBe(true);
    expect(get(t).error).toBe('not in the archive either');
    // An archive that cannot be read is an error to retry, not "gone".
    m.on('GET', '/api/archives/tasks/t1', () => json(500, { error: { message: 'cannot read the archive' } }));
    await t.reload();
    expect(get(t).gone).toBe(false);
    expect(get(t).error).toBe('cannot read the archive');
  });

  it('opens a task and re-reads it when its events arrive', async () => {
    let reads = 0;
    const m = new MockTransport().on('GET', '/api/tasks/t1', () => {
      reads++;
      return json(200, detail('t1', reads === 1));
    });
    const t = createTask(new Api(m));
    await t.open('t1');
    expect(get(t).detail?.openTurn?.id).toBe('turn-t1');
    t.onEvent({ taskId: 'other', seq: 1, kind: 'task', state: 'TASK_STATE_COMPLETED' });
    t.onEvent({ taskId: 't1', seq: 2, kind: 'statusUpdate', state: 'TASK_STATE_COMPLETED' });
    t.onEvent({ taskId: 't1', seq: 3, kind: 'task', state: 'TASK_STATE_COMPLETED' });
    await tick(150);
    expect(reads).toBe(2);
    expect(get(t).detail?.openTurn).toBeUndefined();
  });

  it('a re-read due for the task left behind does not keep the next one from loading', async () => {
    // After a decision the next task opens at once; the decided task's
    // events still ask for a re-read of it 100 ms later, while the next
    // task's detail is on its way.
    const { held: slow, open: release } = gate();
    const m = new MockTransport()
      .on('GET', '/api/tasks/t1', detail('t1'))
      .on('GET', '/api/tasks/t2', async () => {
        await slow;
        return json(200, detail('t2'));
      });
    const t = createTask(new Api(m));
    await t.open('t1');
    t.onEvent({ taskId: 't1', seq: 2, kind: 'statusUpdate', state: 'TASK_STATE_COMPLETED' });
    const opening = t.open('t2');
    await tick(150);
    release();
    await opening;
    expect(get(t).id).toBe('t2');
    expect(get(t).loading).toBe(false);
    expect(get(t).detail?.task.id).toBe('t2');
    expect(m.paths('GET').filter((p) => p === '/api/tasks/t1')).toHaveLength(1);
  });

  it('decides the open turn, shows "already decided", and retries a failure', async () => {
    let attempt = 0;
    const m = new MockTransport()
      .on('GET', '/api/tasks/t1', detail('t1'))
      .on('POST', '/api/tasks/t1/decision', () => {
        attempt++;
        if (attempt === 1) return json(0, null);
        if (attempt === 2) return json(200, { decision: { id: 'd', kind: 'reply', delivery: 'pending' } });
        return json(409, { error: { message: 'already decided: reply by ui' }, decision: { id: 'd', kind: 'reply', actor: 'ui' } });
      });
    const t = createTask(new Api(m));
    await t.open('t1');
    const first = await t.decide({ kind: 'reply', text: 'yes', data: { n: 1 } });
    expect(first).toMatchObject({ ok: false, alreadyDecided: false, message: 'Countersign cannot be reached' });
    expect(get(t).result).toEqual(first);
    const second = await t.retry();
    expect(second).toMatchObject({ ok: true, decision: { delivery: 'pending' } });
    const posts = m.calls.filter((c) => c.method === 'POST').map((c) => c.body);
    expect(posts[0]).toEqual({ kind: 'reply', text: 'yes', data: { n: 1 }, turnId: 'turn-t1' });
    expect(posts[1]).toEqual(posts[0]);
    const third = await t.decide({ kind: 'approve' });
    expect(third).toMatchObject({ ok: false, alreadyDecided: true, decision: { actor: 'ui' } });
  });

  it('ignores an answer for a task no longer open', async () => {
    let release: () => void = () => {};
    const m = new MockTransport()
      .on('GET', '/api/tasks/slow', () => new Promise((r) => (release = () => r(json(200, detail('slow'))))))
      .on('GET', '/api/tasks/fast', detail('fast'));
    const t = createTask(new Api(m));
    const slow = t.open('slow');
    await t.open('fast');
    release();
    await slow;
    expect(get(t).detail?.task.id).toBe('fast');
  });
});
