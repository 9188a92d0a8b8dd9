/**
 * The approval queue as the person sees it: parked turns, filters, the
 * focused row, the selection, and bulk decisions. Kept live from events.
 */
import { get, writable, type Readable } from 'svelte/store';
import type { Api, ApiEvent, DecisionInput, DecisionResult, Turn } from './api';
import { latest } from './latest';

export const PAGE = 500;

const PARKED = new Set(['TASK_STATE_INPUT_REQUIRED', 'TASK_STATE_AUTH_REQUIRED', 'input-required', 'auth-required']);

/** Short state name from an event's `TASK_STATE_…`. */
export function shortState(s: string): string {
  return s.startsWith('TASK_STATE_') ? s.slice(11).toLowerCase().replace(/_/g, '-') : s;
}

export interface QueueFilter {
  agent: string;
  state: string;
  q: string;
  sort: 'oldest' | 'newest';
}

export interface BulkResult {
  taskId: string;
  preview: string;
  outcome: 'ok' | 'already' | 'error';
  message: string;
}

export interface QueueState {
  items: Turn[];
  total: number;
  /** Parked turns per agent (whole queue, ignoring the filter). */
  counts: Record<string, number>;
  /** Parked turns per state (whole queue). */
  stateCounts: Record<string, number>;
  nextCursor: string | null;
  filter: QueueFilter;
  loading: boolean;
  loaded: boolean;
  error: string | null;
  /** Index of the focused row. */
  cursor: number;
  /** Task ids selected for a bulk decision. */
  selected: Set<string>;
  bulk: { running: boolean; kind: string; results: BulkResult[] } | null;
}

export const emptyFilter = (): QueueFilter => ({ agent: '', state: '', q: '', sort: 'newest' });

function initial(): QueueState {
  return {
    items: [],
    total: 0,
    counts: {},
    stateCounts: {},
    nextCursor: null,
    filter: emptyFilter(),
    loading: false,
    loaded: false,
    error: null,
    cursor: 0,
    selected: new Set(),
    bulk: null,
  };
}

export interface QueueStore extends Readable<QueueState> {
  load(): Promise<void>;
  loadMore(): Promise<void>;
  setFilter(f: Partial<QueueFilter>): Promise<void>;
  onEvent(ev: ApiEvent): void;
  resync(): Promise<void>;
  /** Re-reads the head of the queue and merges it, keeping what is loaded. */
  refresh(): Promise<void>;
  move(delta: number): void;
  focus(index: number): void;
  focusTask(taskId: string): void;
  focused(): Turn | null;
  toggle(taskId: string): void;
  selectAll(): void;
  clearSelection(): void;
  remove(taskId: string): void;
  decideMany(taskIds: string[], input: DecisionInput): Promise<BulkResult[]>;
  dismissBulk(): void;
}

/** How long events are gathered before the queue's head is re-read. */
export const REFRESH_DEBOUNCE_MS = 150;

export function createQueue(api: Api): QueueStore {
  const store = writable<QueueState>(initial());
  const { subscribe, update } = store;
  let generation = 0;
  let refreshTimer: ReturnType<typeof setTimeout> | null = null;
  /**
   * When each task left the queue (decided here, or an event said so). A
   * page read before that moment may still list it: such rows are stale
   * and are not brought back.
   */
  const gone = new Map<string, number>();
  let clock = 0;
  const stale = (taskId: string, askedAt: number) => (gone.get(taskId) ?? -1) >= askedAt;
  /**
   * Whether the person has put the cursor on a row since the filter last
   * changed. A page that lands after that keeps the cursor on the same task,
   * wherever the new order puts it; otherwise it stays at the same index.
   */
  let pointed = false;

  const params = (f: QueueFilter) => ({
    agent: f.agent || undefined,
    state: f.state || undefined,
    q: f.q || undefined,
    sort: f.sort,
  });

  async function stateCounts(): Promise<Record<string, number>> {
    const [input, auth] = await Promise.all([
      api.queue({ state: 'input-required', limit: 1 }),
      api.queue({ state: 'auth-required', limit: 1 }),
    ]);
    return { 'input-required': input.total, 'auth-required': auth.total };
  }

  /**
   * The first page read for the filter now set. A re-read of the head waits
   * for it: merged into the rows of the filter before, its rows would be
   * shown among theirs, and the cursor would follow a row about to go.
   */
  const firstPage = latest(readFirstPage);
  const load = firstPage.start;

  async function readFirstPage(): Promise<void> {
    const gen = ++generation;
    const f = get(store).filter;
    const askedAt = ++clock;
    update((s) => ({ ...s, loading: true, error: null }));
    try {
      const [page, sc] = await Promise.all([api.queue({ ...params(f), limit: PAGE }), stateCounts()]);
      if (gen !== generation) return;
      page.items = page.items.filter((t) => !stale(t.taskId, askedAt));
      update((s) => {
        const ids = new Set(page.items.map((t) => t.taskId));
        const selected = new Set([...s.selected].filter((id) => ids.has(id)));
        const focusedId = pointed ? s.items[s.cursor]?.taskId : undefined;
        const kept = focusedId ? page.items.findIndex((t) => t.taskId === focusedId) : -1;
        return {
          ...s,
          items: page.items,
          total: page.total,
          counts: page.counts,
          stateCounts: sc,
          nextCursor: page.nextCursor ?? null,
          loading: false,
          loaded: true,
          selected,
          cursor: kept >= 0 ? kept : Math.min(s.cursor, Math.max(0, page.items.length - 1)),
        };
      });
    } catch (e) {
      if (gen !== generation) return;
      update((s) => ({ ...s, loading: false, error: (e as Error).message }));
    }
  }

  async function loadMore(): Promise<void> {
    const s = get(store);
    if (!s.nextCursor || s.loading) return;
    const gen = generation;
    const askedAt = ++clock;
    update((x) => ({ ...x, loading: true }));
    try {
      const page = await api.queue({ ...params(s.filter), limit: PAGE, cursor: s.nextCursor });
      if (gen !== generation) return;
      update((x) => {
        const have = new Set(x.items.map((t) => t.taskId));
        const more = page.items.filter((t) => !have.has(t.taskId) && !stale(t.taskId, askedAt));
        return {
          ...x,
          items: x.items.concat(more),
          total: page.total,
          counts: page.counts,
          nextCursor: page.nextCursor ?? null,
          loading: false,
        };
      });
    } catch (e) {
      if (gen !== generation) return;
      update((x) => ({ ...x, loading: false, error: (e as Error).message }));
    }
  }

  /** Re-reads the first page and merges it: new turns appear, gone ones go. */
  async function refreshHead(): Promise<void> {
    await firstPage.settled();
    const gen = generation;
    const f = get(store).filter;
    const askedAt = ++clock;
    try {
      const [page, sc] = await Promise.all([api.queue({ ...params(f), limit: PAGE }), stateCounts()]);
      if (gen !== generation) return;
      page.items = page.items.filter((t) => !stale(t.taskId, askedAt));
      update((s) => {
        const byId = new Map(s.items.map((t) => [t.taskId, t]));
        const fresh = page.items.filter((t) => !byId.has(t.taskId));
        // The head page is authoritative for its range: update states.
        for (const t of page.items) if (byId.has(t.taskId)) byId.set(t.taskId, t);
        let items = s.items.map((t) => byId.get(t.taskId) ?? t);
        if (fresh.length) {
          // Keep the server's order (by parking time); with more pages still
          // to load, turns beyond the loaded range arrive with them.
          const last = items[items.length - 1];
          const inRange = (t: Turn) =>
            !s.nextCursor || !last || (f.sort === 'newest' ? t.openedMs >= last.openedMs : t.openedMs <= last.openedMs);
          items = items.concat(fresh.filter(inRange));
          // The server orders turns parked in the same millisecond by when
          // they were stored; their ids (UUIDv7) sort the same way.
          const dir = f.sort === 'newest' ? -1 : 1;
          items.sort((a, b) => dir * (a.openedMs - b.openedMs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)));
        }
        const focusedId = s.items[s.cursor]?.taskId;
        let cursor = focusedId ? items.findIndex((t) => t.taskId === focusedId) : s.cursor;
        if (cursor < 0) cursor = Math.min(s.cursor, Math.max(0, items.length - 1));
        return { ...s, items, total: page.total, counts: page.counts, stateCounts: sc, cursor };
      });
    } catch {
      // The next event or reconnect tries again.
    }
  }

  function scheduleRefresh(): void {
    if (refreshTimer) return;
    refreshTimer = setTimeout(() => {
      refreshTimer = null;
      void refreshHead();
    }, REFRESH_DEBOUNCE_MS);
  }

  function remove(taskId: string): void {
    gone.set(taskId, ++clock);
    if (gone.size > 20_000) gone.delete(gone.keys().next().value as string);
    update((s) => {
      const i = s.items.findIndex((t) => t.taskId === taskId);
      if (i < 0) return s;
      const t = s.items[i];
      const items = s.items.slice(0, i).concat(s.items.slice(i + 1));
      const counts = { ...s.counts };
      if (counts[t.agentId]) counts[t.agentId] -= 1;
      if (counts[t.agentId] === 0) delete counts[t.agentId];
      const stateCounts = { ...s.stateCounts };
      if (stateCounts[t.state]) stateCounts[t.state] -= 1;
      const selected = new Set(s.selected);
      selected.delete(taskId);
      const cursor = i < s.cursor ? s.cursor - 1 : Math.min(s.cursor, Math.max(0, items.length - 1));
      return { ...s, items, total: Math.max(0, s.total - 1), counts, stateCounts, selected, cursor };
    });
  }

  function onEvent(ev: ApiEvent): void {
    if (!ev.taskId || !ev.state) return;
    const parked = PARKED.has(ev.state);
    const s = get(store);
    const present = s.items.find((t) => t.taskId === ev.taskId);
    if (!parked) {
      if (present) remove(ev.taskId);
      else {
        gone.set(ev.taskId, ++clock);
        if (s.total > s.items.length) scheduleRefresh();
      }
      return;
    }
    // Parked (again): whatever said it left is older than this.
    gone.delete(ev.taskId);
    if (!present || present.state !== shortState(ev.state)) scheduleRefresh();
  }

  function setCursor(i: number): void {
    pointed = true;
    update((s) => ({ ...s, cursor: Math.max(0, Math.min(i, s.items.length - 1)) }));
  }

  async function decideMany(taskIds: string[], input: DecisionInput): Promise<BulkResult[]> {
    const s = get(store);
    const byId = new Map(s.items.map((t) => [t.taskId, t]));
    const results: BulkResult[] = [];
    update((x) => ({ ...x, bulk: { running: true, kind: input.kind, results: [] } }));
    // A few at a time: fast, without flooding the server's writer.
    const queue = [...taskIds];
    const worker = async () => {
      for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
        const preview = byId.get(id)?.preview ?? id;
        let r: DecisionResult;
        try {
          r = await api.decide(id, input);
        } catch (e) {
          r = { ok: false, alreadyDecided: false, status: 0, message: (e as Error).message };
        }
        const result: BulkResult = r.ok
          ? { taskId: id, preview, outcome: 'ok', message: `${r.decision.kind} (${r.decision.delivery})` }
          : r.alreadyDecided
            ? { taskId: id, preview, outcome: 'already', message: r.message }
            : { taskId: id, preview, outcome: 'error', message: r.message };
        results.push(result);
        if (result.outcome !== 'error') remove(id);
        update((x) => ({ ...x, bulk: { running: true, kind: input.kind, results: [...results] } }));
      }
    };
    await Promise.all(Array.from({ length: Math.min(4, taskIds.length) }, worker));
    update((x) => ({ ...x, bulk: { running: false, kind: input.kind, results: [...results] } }));
    return results;
  }

  return {
    subscribe,
    load,
    loadMore,
    async setFilter(f) {
      // The rows shown stay until the new ones arrive: no flash of "nothing".
      pointed = false;
      update((s) => ({ ...s, filter: { ...s.filter, ...f }, cursor: 0, nextCursor: null }));
      await load();
    },
    onEvent,
    resync: load,
    refresh: refreshHead,
    move(delta) {
      const s = get(store);
      setCursor(s.cursor + delta);
      if (s.cursor + delta >= s.items.length - 50) void loadMore();
    },
    focus: setCursor,
    focusTask(taskId) {
      const i = get(store).items.findIndex((t) => t.taskId === taskId);
      if (i >= 0) setCursor(i);
    },
    focused() {
      const s = get(store);
      return s.items[s.cursor] ?? null;
    },
    toggle(taskId) {
      update((s) => {
        const selected = new Set(s.selected);
        if (selected.has(taskId)) selected.delete(taskId);
        else selected.add(taskId);
        return { ...s, selected };
      });
    },
    selectAll() {
      update((s) => ({ ...s, selected: new Set(s.items.map((t) => t.taskId)) }));
    },
    clearSelection() {
      update((s) => ({ ...s, selected: new Set() }));
    },
    remove,
    decideMany,
    dismissBulk() {
      update((s) => ({ ...s, bulk: null }));
    },
  };
}
