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

/** What people call one agent or peer: its name, else its id. */
export function label(x: { id: string; name?: string | null }): string {
  return x.name || x.id;
}

/**
 * What people call an agent or peer: its configured name, else its card's
 * name, else its id (`{tenant}/{id}` for a tenant's agent).
 */
export function nameOf(s: Pick<PeersState, 'agents' | 'peers'>, id: string): string {
  return s.agents.find((a) => a.id === id)?.name || s.peers.find((p) => p.id === id)?.name || id;
}

/** Whether `id` is a served agent or a peer the state holds. */
export function knows(s: Pick<PeersState, 'agents' | 'peers'>, id: string): boolean {
  return s.agents.some((a) => a.id === id) || s.peers.some((p) => p.id === id);
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
  // peers back (a "card changed" banner vanished that way). Each read takes
  // a number when it starts (see `ordered`).
  const { begin, newest } = ordered();
  // A change made here (add, remove, refresh, trust) is shown when it
  // answers, and is newer than any read started before that: such a read
  // keeps the changed peer as shown. Peer id → the number taken on answer.
  const changed = new Map<string, number>();

  function changedNow(id: string): void {
    changed.set(id, begin());
  }

  /** What a read started as `seq` shows in place of `shown`. */
  function fromRead(seq: number, read: Peer[], shown: Peer[]): Peer[] {
    if (!newest(seq)) return shown;
    const after = (id: string) => (changed.get(id) ?? 0) > seq;
    const out = read.flatMap((p) => {
      if (!after(p.id)) return [p];
      const mine = shown.find((x) => x.id === p.id);
      return mine ? [mine] : [];
    });
    const added = shown.filter((x) => after(x.id) && !read.some((p) => p.id === x.id));
    return out.concat(added);
  }

  async function load(): Promise<void> {
    const seq = begin();
    update((s) => ({ ...s, loading: true, error: null }));
    try {
      const [{ agents }, { peers }, { items }] = await Promise.all([api.agents(), api.peers(), api.outbox(false)]);
      update((s) => ({ ...s, agents, peers: fromRead(seq, peers, s.peers), outbox: items, loading: false }));
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
      changedNow(peer.id);
      update((s) => ({
        ...s,
        peers: s.peers.filter((x) => x.id !== peer.id).concat(peer),
        health: { ...s.health, [peer.id]: { ok: true, message: 'card read', atMs: Date.now() } },
      }));
      return peer;
    },
    async remove(id) {
      await api.removePeer(id);
      changedNow(id);
      update((s) => ({ ...s, peers: s.peers.filter((x) => x.id !== id) }));
    },
    async refresh(id) {
      try {
        const { peer } = await api.refreshPeer(id);
        changedNow(id);
        update((s) => ({
          ...s,
          peers: s.peers.map((x) => (x.id === id ? peer : x)),
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
        .then(({ peers }) => update((s) => ({ ...s, peers: fromRead(seq, peers, s.peers) })))
        .catch(() => undefined);
    },
    async trust(id) {
      try {
        const { peer } = await api.trustPeer(id);
        changedNow(id);
        const { items } = await api.outbox(false);
        update((s) => ({
          ...s,
          peers: s.peers.map((x) => (x.id === id ? peer : x)),
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
