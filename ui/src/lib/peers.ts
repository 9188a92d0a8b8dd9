/** Served agents and peers (remote agents), with their subscriptions. */
import { writable, type Readable } from 'svelte/store';
import type { Agent, Api, ApiEvent, NewPeer, OutboxItem, Peer, PeerSubscription } from './api';
import { ordered } from './latest';

export interface PeersState {
  agents: Agent[];
  peers: Peer[];
  outbox: OutboxItem[];
  /** Health per peer id: `ok`, or the error of the last card refresh. */
  health: Record<string, { ok: boolean; message: string; atMs: number }>;
  subscriptions: Record<string, PeerSubscription>;
  loading: boolean;
  error: string | null;
}

export interface PeersStore extends Readable<PeersState> {
  load(): Promise<void>;
  preview(p: NewPeer): Promise<Record<string, unknown>>;
  add(p: NewPeer): Promise<Peer>;
  remove(id: string): Promise<void>;
  refresh(id: string): Promise<void>;
  trust(id: string): Promise<void>;
  /** A `peer` event (held for a changed card, or released): re-read that peer. */
  onEvent(ev: ApiEvent): void;
  subscribePeer(id: string): Promise<PeerSubscription>;
  retryDelivery(id: string): Promise<void>;
}

export function createPeers(api: Api): PeersStore {
  const store = writable<PeersState>({
    agents: [],
    peers: [],
    outbox: [],
    health: {},
    subscriptions: {},
    loading: false,
    error: null,
  });
  const { subscribe, update } = store;

  // Reads of the peers can land out of order: a full load started before a
  // card change may answer after the event's re-read and would put the old
  // peers back (a "card changed" banner vanished that way). Each read or
  // change takes a number when it starts (see `ordered`).
  const { begin, newest } = ordered();

  async function load(): Promise<void> {
    const seq = begin();
    update((s) => ({ ...s, loading: true, error: null }));
    try {
      const [{ agents }, { peers }, { items }] = await Promise.all([api.agents(), api.peers(), api.outbox(false)]);
      update((s) => ({ ...s, agents, peers: newest(seq) ? peers : s.peers, outbox: items, loading: false }));
    } catch (e) {
      update((s) => ({ ...s, loading: false, error: (e as Error).message }));
    }
  }

  return {
    subscribe,
    load,
    async preview(p) {
      return (await api.previewPeer(p)).card;
    },
    async add(p) {
      const { peer } = await api.addPeer(p);
      newest(begin());
      update((s) => ({
        ...s,
        peers: s.peers.filter((x) => x.id !== peer.id).concat(peer),
        health: { ...s.health, [peer.id]: { ok: true, message: 'card read', atMs: Date.now() } },
      }));
      return peer;
    },
    async remove(id) {
      await api.removePeer(id);
      newest(begin());
      update((s) => ({ ...s, peers: s.peers.filter((x) => x.id !== id) }));
    },
    async refresh(id) {
      const seq = begin();
      try {
        const { peer } = await api.refreshPeer(id);
        update((s) => ({
          ...s,
          peers: newest(seq) ? s.peers.map((x) => (x.id === id ? peer : x)) : s.peers,
          health: { ...s.health, [id]: { ok: true, message: 'card read', atMs: Date.now() } },
        }));
      } catch (e) {
        update((s) => ({
          ...s,
          health: { ...s.health, [id]: { ok: false, message: (e as Error).message, atMs: Date.now() } },
        }));
      }
    },
    onEvent(ev) {
      if (ev.kind !== 'peer' || typeof ev.peerId !== 'string') return;
      const seq = begin();
      void api
        .peers()
        .then(({ peers }) => update((s) => ({ ...s, peers: newest(seq) ? peers : s.peers })))
        .catch(() => undefined);
    },
    async trust(id) {
      const seq = begin();
      try {
        const { peer } = await api.trustPeer(id);
        const { items } = await api.outbox(false);
        update((s) => ({
          ...s,
          peers: newest(seq) ? s.peers.map((x) => (x.id === id ? peer : x)) : s.peers,
          outbox: items,
          error: null,
        }));
      } catch (e) {
        update((s) => ({ ...s, error: (e as Error).message }));
      }
    },
    async retryDelivery(id) {
      try {
        await api.retryDelivery(id);
        const { items } = await api.outbox(false);
        update((s) => ({ ...s, outbox: items, error: null }));
      } catch (e) {
        update((s) => ({ ...s, error: (e as Error).message }));
      }
    },
    async subscribePeer(id) {
      const sub = await api.subscribePeer(id);
      update((s) => ({ ...s, subscriptions: { ...s.subscriptions, [id]: sub } }));
      return sub;
    },
  };
}
