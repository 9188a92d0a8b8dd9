import { describe, expect, it } from 'vitest';
import { get } from 'svelte/store';
import { Api } from './api';
import { createPeers } from './peers';
import { MockTransport, json, tick } from '../test/mock';

const peer = (cardChange: unknown) => ({ id: 'pinned', url: 'http://127.0.0.1:1/', name: null, cardChange });

describe('peers store', () => {
  it('keeps a card change an event read even when an older load answers after it', async () => {
    let release: () => void = () => {};
    const held = new Promise<void>((r) => (release = r));
    let reads = 0;
    const change = { changed: ['skills'] };
    const m = new MockTransport()
      .on('GET', '/api/agents', { agents: [] })
      .on('GET', /^\/api\/outbox/, { items: [] })
      .on('GET', '/api/peers', async () => {
        reads += 1;
        // The first read (the load) saw the peer before its card changed,
        // and answers last.
        if (reads === 1) {
          await held;
          return json(200, { peers: [peer(null)] });
        }
        return json(200, { peers: [peer(change)] });
      });
    const peers = createPeers(new Api(m));
    const loading = peers.load();
    await tick();
    peers.onEvent({ kind: 'peer', peerId: 'pinned' });
    await tick();
    expect(get(peers).peers[0].cardChange).toEqual(change);
    release();
    await loading;
    expect(get(peers).peers[0].cardChange).toEqual(change);
    expect(get(peers).loading).toBe(false);
  });

  it('shows a later load over an earlier event read that answers last', async () => {
    let release: () => void = () => {};
    const held = new Promise<void>((r) => (release = r));
    let reads = 0;
    const m = new MockTransport()
      .on('GET', '/api/agents', { agents: [] })
      .on('GET', /^\/api\/outbox/, { items: [] })
      .on('GET', '/api/peers', async () => {
        reads += 1;
        if (reads === 1) {
          await held;
          return json(200, { peers: [peer({ changed: ['auth'] })] });
        }
        return json(200, { peers: [peer(null)] });
      });
    const peers = createPeers(new Api(m));
    peers.onEvent({ kind: 'peer', peerId: 'pinned' });
    await tick();
    await peers.load();
    release();
    await tick(5);
    expect(get(peers).peers[0].cardChange).toBeNull();
  });
});
