/** Chain rules and their recent hops. */
import { get, writable, type Readable } from 'svelte/store';
import type { Api, ApiEvent, ChainHop, ChainRule, NewChainRule } from './api';
import { ordered } from './latest';

export interface ChainsState {
  rules: ChainRule[];
  hops: ChainHop[];
  loading: boolean;
  /** The API is not there (an older server): the screen says so. */
  unavailable: boolean;
  error: string | null;
  /** Loaded at least once (the screen was opened). */
  loaded: boolean;
}

export interface ChainsStore extends Readable<ChainsState> {
  load(): Promise<void>;
  loadHops(): Promise<void>;
  save(rule: NewChainRule, existingId?: string): Promise<ChainRule>;
  remove(id: string): Promise<void>;
  toggle(rule: ChainRule): Promise<void>;
  release(hopId: string): Promise<void>;
  drop(hopId: string): Promise<void>;
  onEvent(ev: ApiEvent): void;
}

/** A rule as the API takes it back: without its `source`. */
export function editable(rule: ChainRule): NewChainRule {
  const { source: _source, ...rest } = rule;
  return rest;
}

export function createChains(api: Api): ChainsStore {
  const store = writable<ChainsState>({ rules: [], hops: [], loading: false, unavailable: false, error: null, loaded: false });
  const { subscribe, update } = store;

  let hopTimer: ReturnType<typeof setTimeout> | null = null;
  const fail = (e: unknown) => {
    const status = (e as { status?: number }).status;
    update((s) => ({ ...s, loading: false, unavailable: status === 404, error: (e as Error).message }));
  };

  // Hops are read on open, after task events and after each answer; a read
  // that answers after a later one must not put older hops back (a released
  // hop would show as gated again).
  const hopReads = ordered();

  async function loadHops(): Promise<void> {
    const seq = hopReads.begin();
    try {
      const { hops } = await api.hops(50);
      if (hopReads.newest(seq)) update((s) => ({ ...s, hops }));
    } catch (e) {
      fail(e);
    }
  }

  async function load(): Promise<void> {
    const seq = hopReads.begin();
    update((s) => ({ ...s, loading: true, error: null, loaded: true }));
    try {
      const [{ rules }, { hops }] = await Promise.all([api.chains(), api.hops(50)]);
      update((s) => ({ ...s, rules, hops: hopReads.newest(seq) ? hops : s.hops, loading: false, unavailable: false }));
    } catch (e) {
      fail(e);
    }
  }

  return {
    subscribe,
    load,
    loadHops,
    async save(rule, existingId) {
      const { rule: saved } = existingId ? await api.updateChain(existingId, rule) : await api.addChain(rule);
      update((s) => {
        const i = s.rules.findIndex((r) => r.id === (existingId ?? saved.id));
        const rules = i >= 0 ? s.rules.map((r, j) => (j === i ? saved : r)) : s.rules.concat(saved);
        return { ...s, rules, error: null };
      });
      return saved;
    },
    async remove(id) {
      await api.removeChain(id);
      update((s) => ({ ...s, rules: s.rules.filter((r) => r.id !== id) }));
    },
    async toggle(rule) {
      const { rule: saved } = await api.updateChain(rule.id, { ...editable(rule), enabled: !rule.enabled });
      update((s) => ({ ...s, rules: s.rules.map((r) => (r.id === rule.id ? saved : r)) }));
    },
    async release(id) {
      await api.releaseHop(id);
      await loadHops();
    },
    async drop(id) {
      await api.dropHop(id);
      await loadHops();
    },
    onEvent(ev) {
      // Hops follow task changes (a trigger state, a chained task moving on).
      const s = get(store);
      if (!s.loaded || s.unavailable || (ev.kind !== 'chain' && !ev.state) || hopTimer) return;
      hopTimer = setTimeout(() => {
        hopTimer = null;
        void loadHops();
      }, 250);
    },
  };
}
