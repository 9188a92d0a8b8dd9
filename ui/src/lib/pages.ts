/**
 * A list read newest first in pages (history, recent tasks): filters, "load
 * more", a refresh that brings in new rows without losing the pages loaded,
 * and a keyboard cursor that stays on its row.
 */
import { get, writable, type Readable } from 'svelte/store';
import { latest } from './latest';

/** One page as the server sends it. */
export interface Page<T> {
  items: T[];
  nextCursor?: string | null;
}

/** The list's state: its filters (`F`, spread in) and its rows. */
export type PagesState<T, F> = F & {
  items: T[];
  nextCursor: string | null;
  loading: boolean;
  error: string | null;
  cursor: number;
  /** Loaded at least once (the screen was opened). */
  loaded: boolean;
};

export interface PagesStore<T, F> extends Readable<PagesState<T, F>> {
  load(): Promise<void>;
  /** Brings in rows added since the list was loaded, keeping the pages
   *  already loaded and the row the cursor is on. */
  refresh(): Promise<void>;
  loadMore(): Promise<void>;
  setFilter(f: Partial<F>): Promise<void>;
  move(delta: number): void;
  /** The filters now set. */
  filter(): F;
}

/** A paged list: `read` fetches the page after `cursor` (the first when
 *  none) for the filters `f`; `key` names a row across pages. */
export function createPages<T, F extends object>(
  initial: F,
  read: (f: F, cursor?: string) => Promise<Page<T>>,
  key: (row: T) => string,
): PagesStore<T, F> {
  const store = writable<PagesState<T, F>>({
    ...initial,
    items: [],
    nextCursor: null,
    loading: false,
    error: null,
    cursor: 0,
    loaded: false,
  });
  const { subscribe, update } = store;
  const filter = (): F => {
    const s = get(store);
    const f = {} as F;
    for (const k of Object.keys(initial) as (keyof F)[]) f[k] = s[k];
    return f;
  };
  let generation = 0;

  /** The first page read for the filters now set: a refresh waits for it
   *  rather than join its page to the rows of the filters before. */
  const firstPage = latest(readFirstPage);
  const load = firstPage.start;

  async function readFirstPage(): Promise<void> {
    const gen = ++generation;
    update((x) => ({ ...x, loading: true, error: null }));
    try {
      const page = await read(filter());
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
    try {
      const page = await read(filter());
      if (gen !== generation || mine !== refreshes) return;
      update((x) => ({ ...x, ...stitch(x, page.items, page.nextCursor ?? null, key), loaded: true }));
    } catch (e) {
      if (gen !== generation || mine !== refreshes) return;
      update((x) => ({ ...x, error: (e as Error).message }));
    }
  }

  return {
    subscribe,
    load,
    refresh,
    filter,
    async loadMore() {
      const s = get(store);
      if (!s.nextCursor || s.loading) return;
      const gen = generation;
      update((x) => ({ ...x, loading: true }));
      try {
        const page = await read(filter(), s.nextCursor);
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
    move(delta) {
      update((x) => ({ ...x, cursor: Math.max(0, Math.min(x.cursor + delta, x.items.length - 1)) }));
    },
  };
}

/** The list `x` with its head replaced by a fresh first page `first`. The
 *  pages loaded after the first are kept when the fresh page reaches into
 *  them (its last row is among them), less any row the fresh page holds (a
 *  task that changed moved up); otherwise the list starts over from the
 *  fresh page. The cursor stays on the row it was on. */
export function stitch<T>(
  x: { items: T[]; nextCursor: string | null; cursor: number },
  first: T[],
  firstNext: string | null,
  key: (row: T) => string,
): { items: T[]; nextCursor: string | null; cursor: number; error: null } {
  const last = first[first.length - 1];
  const at = last ? x.items.findIndex((it) => key(it) === key(last)) : -1;
  const keep = at >= 0 && firstNext !== null;
  const fresh = new Set(first.map(key));
  const items = keep ? first.concat(x.items.slice(at + 1).filter((it) => !fresh.has(key(it)))) : first;
  const nextCursor = keep ? x.nextCursor : firstNext;
  const pointed = x.items[x.cursor];
  const found = pointed === undefined ? -1 : items.findIndex((it) => key(it) === key(pointed));
  const cursor = found >= 0 ? found : Math.max(0, Math.min(x.cursor, items.length - 1));
  return { items, nextCursor, cursor, error: null };
}
