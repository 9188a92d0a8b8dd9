import { describe, expect, it } from 'vitest';
import { get } from 'svelte/store';
import { Api, type ChainHop, type ChainRule } from './api';
import { createChains, editable } from './chains';
import { MockTransport, gate, json, tick } from '../test/mock';

const fromConfig: ChainRule = {
  id: 'notify-ops',
  source: 'config',
  enabled: true,
  gate: false,
  trigger: { agent: 'inbox', peer: null, states: ['completed'], skill: null },
  action: { kind: 'push', url: 'https://hooks.example.com/a', authScheme: 'Bearer', credentials: null, token: null },
};

/** The chains API as the contract describes it, in memory. */
function chainsServer() {
  const rules: ChainRule[] = [fromConfig];
  const hops: ChainHop[] = [
    {
      id: 'h1',
      ruleId: 'notify-ops',
      parentTaskId: 't1',
      childTaskId: null,
      state: 'gated',
      reason: null,
      createdAt: '2026-01-01T00:00:00.000Z',
      updatedAt: '2026-01-01T00:00:00.000Z',
    },
  ];
  const m = new MockTransport()
    .on('GET', '/api/chains', () => json(200, { rules }))
    .on('GET', /^\/api\/chains\/hops\?limit=50$/, () => json(200, { hops }))
    .on('POST', '/api/chains', (body) => {
      const b = body as Omit<ChainRule, 'source'>;
      if (!b.trigger.agent === !b.trigger.peer) return json(400, { error: { code: 400, message: 'exactly one of trigger.agent and trigger.peer' } });
      const rule = { ...b, id: b.id ?? 'deploy-after-review', source: 'api' as const };
      rules.push(rule);
      return json(201, { rule });
    })
    .on('PUT', /^\/api\/chains\/[^/]+$/, (body, path) => {
      const id = decodeURIComponent(path.split('/').pop() ?? '');
      const i = rules.findIndex((r) => r.id === id);
      if (rules[i]?.source === 'config') return json(409, { error: { message: 'rule `notify-ops` comes from the config file' } });
      rules[i] = { ...(body as ChainRule), id, source: 'api' };
      return json(200, { rule: rules[i] });
    })
    .on('DELETE', /^\/api\/chains\/[^/]+$/, (_b, path) => {
      const id = decodeURIComponent(path.split('/').pop() ?? '');
      const i = rules.findIndex((r) => r.id === id);
      if (rules[i]?.source === 'config') return json(409, { error: { message: 'rule `notify-ops` comes from the config file' } });
      rules.splice(i, 1);
      return { status: 204, contentType: '', body: null };
    })
    .on('POST', /^\/api\/chains\/hops\/h1\/(release|drop)$/, (_b, path) => {
      hops[0] = { ...hops[0], state: path.endsWith('release') ? 'pending' : 'refused' };
      return json(200, { hop: hops[0] });
    });
  return { m, rules, hops };
}

describe('chains store', () => {
  it('lists rules and hops, adds, edits, toggles and removes an API rule', async () => {
    const { m } = chainsServer();
    const c = createChains(new Api(m));
    await c.load();
    expect(get(c).rules.map((r) => r.id)).toEqual(['notify-ops']);
    expect(get(c).hops[0].state).toBe('gated');

    const added = await c.save({
      enabled: true,
      gate: true,
      trigger: { agent: null, peer: 'b', states: ['completed'], skill: null },
      action: { kind: 'send', peer: 'b', template: 'Result of {{task.id}}', context: 'new', artifacts: true },
    });
    expect(added).toMatchObject({ id: 'deploy-after-review', source: 'api' });
    const post = m.calls.find((x) => x.method === 'POST' && x.path === '/api/chains');
    expect(post?.body).not.toHaveProperty('source');
    expect(post?.body).not.toHaveProperty('id');

    await c.save({ ...editable(added), gate: false }, added.id);
    expect(get(c).rules.find((r) => r.id === added.id)?.gate).toBe(false);
    const put = m.calls.find((x) => x.method === 'PUT');
    expect(put?.path).toBe('/api/chains/deploy-after-review');
    expect(put?.body).not.toHaveProperty('source');

    await c.toggle(get(c).rules.find((r) => r.id === added.id)!);
    expect(get(c).rules.find((r) => r.id === added.id)?.enabled).toBe(false);

    await c.remove(added.id);
    expect(get(c).rules.map((r) => r.id)).toEqual(['notify-ops']);
  });

  it('surfaces the server message for config rules and invalid rules', async () => {
    const { m } = chainsServer();
    const c = createChains(new Api(m));
    await c.load();
    await expect(c.remove('notify-ops')).rejects.toThrow('comes from the config file');
    await expect(c.toggle(fromConfig)).rejects.toThrow('comes from the config file');
    await expect(
      c.save({
        enabled: true,
        gate: false,
        trigger: { agent: 'inbox', peer: 'b', states: ['completed'], skill: null },
        action: { kind: 'push', url: 'https://x.example', authScheme: null, credentials: null, token: null },
      }),
    ).rejects.toThrow('exactly one of trigger.agent and trigger.peer');
    expect(get(c).rules).toHaveLength(1);
  });

  it('releases and drops gated hops, and re-reads hops when tasks change', async () => {
    const { m, hops } = chainsServer();
    const c = createChains(new Api(m));
    await c.load();
    await c.release('h1');
    expect(get(c).hops[0].state).toBe('pending');
    await c.drop('h1');
    expect(get(c).hops[0].state).toBe('refused');
    hops[0] = { ...hops[0], state: 'delivered', childTaskId: 't2' };
    const before = m.calls.length;
    // A burst of task and chain events: one re-read.
    c.onEvent({ kind: 'task', taskId: 'x', seq: 1, state: 'TASK_STATE_COMPLETED' });
    c.onEvent({ kind: 'chain' });
    c.onEvent({ kind: 'statusUpdate', taskId: 'x', seq: 2, state: 'TASK_STATE_COMPLETED' });
    await tick(300);
    expect(m.calls.length - before).toBe(1);
    expect(get(c).hops[0]).toMatchObject({ state: 'delivered', childTaskId: 't2' });
  });

  it('keeps a released hop released when the screen\'s first read answers after it', async () => {
    const { m, hops } = chainsServer();
    const { held, open } = gate();
    let reads = 0;
    // The first hops read saw the hop gated, and answers last.
    m.on('GET', /^\/api\/chains\/hops/, async () => {
      reads += 1;
      const seen = hops.map((h) => ({ ...h }));
      if (reads === 1) await held;
      return json(200, { hops: seen });
    });
    const c = createChains(new Api(m));
    const loading = c.load();
    await tick();
    await c.release('h1');
    expect(get(c).hops[0].state).toBe('pending');
    open();
    await loading;
    expect(get(c).hops[0].state).toBe('pending');
  });

  it('says so when the server has no chains API', async () => {
    const c = createChains(new Api(new MockTransport()));
    await c.load();
    expect(get(c).unavailable).toBe(true);
  });
});
