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

describe('notifier', () => {
  it('tells once per newly parked task, only when allowed and as the settings say', () => {
    const { ctor, shown } = fake();
    let hidden = false;
    const n = createNotifier(ctor, () => hidden);
    const base = defaultSettings();
    const s = { ...base, notifications: { ...base.notifications, onlyWhenHidden: true } };
    const parked = { taskId: 't1', agentId: 'inbox', seq: 1, kind: 'task', state: 'TASK_STATE_INPUT_REQUIRED' };
    n.onEvent(parked, s);
    expect(shown).toHaveLength(0); // the window is in front
    hidden = true;
    n.onEvent(parked, s);
    n.onEvent({ ...parked, seq: 2 }, s);
    n.onEvent({ ...parked, taskId: 't2', state: 'TASK_STATE_COMPLETED' }, s);
    expect(shown).toEqual([{ title: 'Countersign', opts: { body: 'inbox waits for your decision', tag: 't1', silent: true } }]);
    n.onEvent({ ...parked, taskId: 't3' }, { ...s, notifications: { ...s.notifications, enabled: false } });
    expect(shown).toHaveLength(1);
    // A muted agent stays quiet; others still tell.
    const muted = { ...s, notifications: { ...s.notifications, mutedAgents: ['inbox'] } };
    n.onEvent({ ...parked, taskId: 't4' }, muted);
    expect(shown).toHaveLength(1);
    n.onEvent({ ...parked, taskId: 't5', agentId: 'ops' }, muted);
    expect(shown).toHaveLength(2);
  });

  it('opens the task when clicked', () => {
    const { ctor, made } = fake();
    const opened: string[] = [];
    const n = createNotifier(ctor, () => true, (id) => opened.push(id));
    n.onEvent({ taskId: 't/9', agentId: 'inbox', seq: 1, kind: 'task', state: 'TASK_STATE_INPUT_REQUIRED' }, defaultSettings());
    expect(made).toHaveLength(1);
    expect(opened).toEqual([]);
    made[0].onclick?.();
    expect(opened).toEqual(['t/9']);
  });

  it('stays quiet without permission', () => {
    const { ctor, shown } = fake('default');
    createNotifier(ctor, () => true).onEvent(
      { taskId: 't', seq: 1, kind: 'task', state: 'TASK_STATE_AUTH_REQUIRED' },
      defaultSettings(),
    );
    expect(shown).toHaveLength(0);
  });
});
