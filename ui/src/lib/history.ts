/** Decided turns, newest first, with filters and export. */
import { get, writable, type Readable } from 'svelte/store';
import type { Api, HistoryItem } from './api';
import { latest } from './latest';

export interface HistoryState {
  items: HistoryItem[];
  nextCursor: string | null;
  agent: string;
  q: string;
  loading: boolean;
  error: string | null;
  cursor: number;
  /** Loaded at least once (the screen was opened). */
  loaded: boolean;
}

export interface HistoryStore extends Readable<HistoryState> {
  load(): Promise<void>;
  /** Brings in decisions made since the list was loaded, keeping the pages
   *  already loaded and the row the cursor is on. */
  refresh(): Promise<void>;
  loadMore(): Promise<void>;
  setFilter(f: { agent?: string; q?: string }): Promise<void>;
  exportAs(format: 'jsonl' | 'csv'): Promise<{ blob: Blob; filename: string }>;
  move(delta: number): void;
}

export function createHistory(api: Api): HistoryStore {
  const store = writable<HistoryState>({
    items: [],
    nextCursor: null,
    agent: '',
    q: '',
    loading: false,
    error: null,
    cursor: 0,
    loaded: false,
  });
  const { subscribe, update } = store;
  let generation = 0;

  /** The first page read for the filters now set: a refresh waits for it
   *  rather than join its page to the rows of the filters before. */
  const firstPage = latest(readFirstPage);
  const load = firstPage.start;

  async function readFirstPage(): Promise<void> {
    const gen = ++generation;
    const s = get(store);
    update((x) => ({ ...x, loading: true, error: null }));
    try {
      const page = await api.history({ agent: s.agent || undefined, q: s.q || undefined, limit: 200 });
      if (gen !== generation) return;
      update((x) => ({ ...x, items: page.items, nextCursor: page.nextCursor ?? null, loading: false, loaded: true }));
    } catch (e) {
      if (gen !== generation) return;
      update((x) => ({ ...x, loading: false, error: (e as Error).message }));
    }
  }

  let refreshes = 0;

  async function refresh(): Promise<void> {
    await firstPage.settled();
    const gen = generation;
    const mine = ++refreshes;
    const s = get(store);
    try {
      const page = await api.history({ agent: s.agent || undefined, q: s.q || undefined, limit: 200 });
      if (gen !== generation || mine !== refreshes) return;
      update((x) => ({ ...x, ...stitch(x, page.items, page.nextCursor ?? null), loaded: true }));
    } catch (e) {
      if (gen !== generation || mine !== refreshes) return;
      update((x) => ({ ...x, error: (e as Error).message }));
    }
  }

  return {
    subscribe,
    load,
    refresh,
    async loadMore() {
      const s = get(store);
      if (!s.nextCursor || s.loading) return;
      const gen = generation;
      update((x) => ({ ...x, loading: true }));
      try {
        const page = await api.history({
          agent: s.agent || undefined,
          q: s.q || undefined,
          limit: 200,
          cursor: s.nextCursor,
        });
        if (gen !== generation) return;
        update((x) => ({
          ...x,
          items: x.items.concat(page.items),
          nextCursor: page.nextCursor ?? null,
          loading: false,
        }));
      } catch (e) {
        update((x) => ({ ...x, loading: false, error: (e as Error).message }));
      }
    },
    async setFilter(f) {
      update((x) => ({ ...x, ...f, cursor: 0 }));
      await load();
    },
    async exportAs(format) {
      const s = get(store);
      const blob = await api.exportHistory(format, { agent: s.agent || undefined, q: s.q || undefined });
      return { blob, filename: `countersign-history.${format}` };
    },
    move(delta) {
      update((x) => ({ ...x, cursor: Math.max(0, Math.min(x.cursor + delta, x.items.length - 1)) }));
    },
  };
}

/** The list `x` with its head replaced by a fresh first page `first`. The
 *  pages loaded after the first are kept when the fresh page reaches into
 *  them (its last row is among them); otherwise the list starts over from
 *  the fresh page. The cursor stays on the row it was on. */
export function stitch(
  x: Pick<HistoryState, 'items' | 'nextCursor' | 'cursor'>,
  first: HistoryItem[],
  firstNext: string | null,
): Pick<HistoryState, 'items' | 'nextCursor' | 'cursor' | 'error'> {
  const last = first[first.length - 1];
  const at = last ? x.items.findIndex((it) => it.decision.id === last.decision.id) : -1;
  const keep = at >= 0 && firstNext !== null;
  const items = keep ? first.concat(x.items.slice(at + 1)) : first;
  const nextCursor = keep ? x.nextCursor : firstNext;
  const pointed = x.items[x.cursor]?.decision.id;
  const found = pointed === undefined ? -1 : items.findIndex((it) => it.decision.id === pointed);
  const cursor = found >= 0 ? found : Math.max(0, Math.min(x.cursor, items.length - 1));
  return { items, nextCursor, cursor, error: null };
}
