import { describe, expect, it } from 'vitest';
import { createNotifier } from './notify';
import { defaultSettings } from './settings';

function fake(permission = 'granted') {
  const shown: { title: string; opts: unknown }[] = [];
  const made: { onclick: (() => void) | null }[] = [];
  const ctor = class {
    static permission = permission;
    onclick: (() => void) | null = null;
    constructor(title: string, opts?: unknown) {
      shown.push({ title, opts });
      made.push(this);
    }
  };
  return { ctor, shown, made };
}

/** Lets the notifier's read of the task answer. */
const settle = () => new Promise((r) => setTimeout(r, 0));

describe('notifier', () => {
  it('tells once per newly parked task, only when allowed and as the settings say', async () => {
    const { ctor, shown } = fake();
    let hidden = false;
    const n = createNotifier(ctor, () => hidden);
    const base = defaultSettings();
    const s = { ...base, notifications: { ...base.notifications, onlyWhenHidden: true } };
    const parked = { taskId: 't1', agentId: 'inbox', seq: 1, kind: 'task', state: 'TASK_STATE_INPUT_REQUIRED' };
    n.onEvent(parked, s);
    await settle();
    expect(shown).toHaveLength(0); // the window is in front
    hidden = true;
    n.onEvent(parked, s);
    n.onEvent({ ...parked, seq: 2 }, s);
    n.onEvent({ ...parked, taskId: 't2', state: 'TASK_STATE_COMPLETED' }, s);
    await settle();
    expect(shown).toEqual([{ title: 'inbox', opts: { body: 'inbox waits for your decision', tag: 't1', silent: true } }]);
    n.onEvent({ ...parked, taskId: 't3' }, { ...s, notifications: { ...s.notifications, enabled: false } });
    await settle();
    expect(shown).toHaveLength(1);
    // A muted agent stays quiet; others still tell.
    const muted = { ...s, notifications: { ...s.notifications, mutedAgents: ['inbox'] } };
    n.onEvent({ ...parked, taskId: 't4' }, muted);
    await settle();
    expect(shown).toHaveLength(1);
    n.onEvent({ ...parked, taskId: 't5', agentId: 'ops' }, muted);
    await settle();
    expect(shown).toHaveLength(2);
  });

  it('names the agent and says what the task asks, or what it waits for when that cannot be read', async () => {
    const { ctor, shown } = fake();
    const asked: string[] = [];
    const n = createNotifier(ctor, () => true, undefined, async (id, agentId) => {
      asked.push(`${id}@${agentId}`);
      if (id === 'gone') throw new Error('HTTP 404');
      if (id === 'nameless') return { line: 'Which region?' };
      return { agent: 'Inbox', line: 'Ship v3 to production?' };
    });
    const parked = { taskId: 't1', agentId: 'inbox', seq: 1, kind: 'task', state: 'TASK_STATE_INPUT_REQUIRED' };
    n.onEvent(parked, defaultSettings());
    n.onEvent({ ...parked, taskId: 'gone', state: 'TASK_STATE_AUTH_REQUIRED' }, defaultSettings());
    n.onEvent({ ...parked, taskId: 'nameless', agentId: 'ops' }, defaultSettings());
    await settle();
    expect(asked).toEqual(['t1@inbox', 'gone@inbox', 'nameless@ops']);
    expect(shown.map((x) => [x.title, (x.opts as { body: string }).body])).toEqual([
      ['Inbox', 'Ship v3 to production?'],
      ['inbox', 'inbox asks you to sign in'],
      ['ops', 'Which region?'],
    ]);
  });

  it('opens the task when clicked', async () => {
    const { ctor, made } = fake();
    const opened: string[] = [];
    const n = createNotifier(ctor, () => true, (id) => opened.push(id));
    n.onEvent({ taskId: 't/9', agentId: 'inbox', seq: 1, kind: 'task', state: 'TASK_STATE_INPUT_REQUIRED' }, defaultSettings());
    await settle();
    expect(made).toHaveLength(1);
    expect(opened).toEqual([]);
    made[0].onclick?.();
    expect(opened).toEqual(['t/9']);
  });

  it('stays quiet without permission', async () => {
    const { ctor, shown } = fake('default');
    createNotifier(ctor, () => true).onEvent(
      { taskId: 't', seq: 1, kind: 'task', state: 'TASK_STATE_AUTH_REQUIRED' },
      defaultSettings(),
    );
    await settle();
    expect(shown).toHaveLength(0);
  });
});
