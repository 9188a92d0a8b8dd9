import { describe, expect, it } from 'vitest';
import { get } from 'svelte/store';
import { Api } from './api';
import { createPeers, knows, label, nameOf } from './peers';
import { MockTransport, gate, json, tick } from '../test/mock';

const peer = (cardChange: unknown) => ({ id: 'pinned', url: 'http://127.0.0.1:1/', name: null, cardChange });

/**
 * A server whose first read of the peers sees the peer with `first` as its
 * card change and answers only when `open` is called; later reads see
 * `later` at once.
 */
function peersServer(first: unknown, later: unknown) {
  const { held, open } = gate();
  let reads = 0;
  const m = new MockTransport()
    .on('GET', '/api/agents', { agents: [] })
    .on('GET', /^\/api\/outbox/, { items: [] })
    .on('GET', '/api/peers', async () => {
      reads += 1;
      if (reads === 1) {
        await held;
        return json(200, { peers: [peer(first)] });
      }
      return json(200, { peers: [peer(later)] });
    });
  return { m, open };
}

describe('peers store', () => {
  it('keeps a card change an event read even when an older load answers after it', async () => {
    const change = { changed: ['skills'] };
    // The first read (the load) saw the peer before its card changed, and
    // answers last.
    const { m, open } = peersServer(null, change);
    const peers = createPeers(new Api(m));
    const loading = peers.load();
    await tick();
    peers.onEvent({ kind: 'peer', peerId: 'pinned' });
    await tick();
    expect(get(peers).peers[0].cardChange).toEqual(change);
    open();
    await loading;
    expect(get(peers).peers[0].cardChange).toEqual(change);
    expect(get(peers).loading).toBe(false);
  });

  it('shows a later load over an earlier event read that answers last', async () => {
    const { m, open } = peersServer({ changed: ['auth'] }, null);
    const peers = createPeers(new Api(m));
    peers.onEvent({ kind: 'peer', peerId: 'pinned' });
    await tick();
    await peers.load();
    open();
    await tick(5);
    expect(get(peers).peers[0].cardChange).toBeNull();
  });

  it('keeps a checked card that answers after a load started later, which read the old one', async () => {
    const { held, open } = gate();
    const m = new MockTransport()
      .on('GET', '/api/agents', { agents: [] })
      .on('GET', /^\/api\/outbox/, { items: [] })
      .on('GET', '/api/peers', { peers: [{ ...peer(null), name: 'old name' }] })
      .on('POST', '/api/peers/pinned/refresh', async () => {
        await held;
        return json(200, { peer: { ...peer(null), name: 'new name' }, card: {} });
      });
    const peers = createPeers(new Api(m));
    await peers.load();
    const checking = peers.refresh('pinned');
    await tick();
    // The load reads the peers before the check has changed them.
    await peers.load();
    open();
    await checking;
    expect(get(peers).peers.map((p) => p.name)).toEqual(['new name']);
    // A load started after the check answered shows what it reads.
    await peers.load();
    expect(get(peers).peers.map((p) => p.name)).toEqual(['old name']);
  });

  it('does not bring back a peer removed while a load was under way, nor drop one added', async () => {
    const { held, open } = gate();
    const m = new MockTransport()
      .on('GET', '/api/agents', { agents: [] })
      .on('GET', /^\/api\/outbox/, { items: [] })
      .on('GET', '/api/peers', async () => {
        await held;
        return json(200, { peers: [peer(null)] });
      })
      .on('DELETE', '/api/peers/pinned', {})
      .on('POST', '/api/peers', { peer: { id: 'fresh', url: 'http://127.0.0.1:2/', name: null, cardChange: null } });
    const peers = createPeers(new Api(m));
    const loading = peers.load();
    await tick();
    await peers.remove('pinned');
    await peers.add({ id: 'fresh', url: 'http://127.0.0.1:2/' } as never);
    open();
    await loading;
    expect(get(peers).peers.map((p) => p.id)).toEqual(['fresh']);
  });
});

describe('nameOf', () => {
  const state = {
    agents: [
      { id: 'inbox', name: 'Inbox' },
      { id: 'acme/inbox', name: 'Acme inbox' },
      { id: 'bare', name: '' },
    ],
    peers: [
      { id: 'inbox', name: 'A peer that shares the id' },
      { id: 'ci', name: 'CI runner' },
      { id: 'anon', name: null },
    ],
  } as never;

  it('names a served agent, a tenant agent and a peer as people know them', () => {
    expect(nameOf(state, 'inbox')).toBe('Inbox');
    expect(nameOf(state, 'acme/inbox')).toBe('Acme inbox');
    expect(nameOf(state, 'ci')).toBe('CI runner');
  });

  it('falls back to the id when there is no name, or nothing by that id', () => {
    expect(nameOf(state, 'bare')).toBe('bare');
    expect(nameOf(state, 'anon')).toBe('anon');
    expect(nameOf(state, 'gone')).toBe('gone');
    expect(knows(state, 'anon')).toBe(true);
    expect(knows(state, 'gone')).toBe(false);
  });
});

describe('label', () => {
  it('is the name, else the id', () => {
    expect(label({ id: 'ci', name: 'CI runner' })).toBe('CI runner');
    expect(label({ id: 'bare', name: '' })).toBe('bare');
    expect(label({ id: 'anon', name: null })).toBe('anon');
  });
});
