/** Decided turns, newest first, with filters and export. */
import type { Api, HistoryItem } from './api';
import { createPages, type PagesState, type PagesStore } from './pages';

export interface HistoryFilter {
  agent: string;
  q: string;
}

export type HistoryState = PagesState<HistoryItem, HistoryFilter>;

export interface HistoryStore extends PagesStore<HistoryItem, HistoryFilter> {
  exportAs(format: 'jsonl' | 'csv'): Promise<{ blob: Blob; filename: string }>;
}

export function createHistory(api: Api): HistoryStore {
  const pages = createPages<HistoryItem, HistoryFilter>(
    { agent: '', q: '' },
    (f, cursor) => api.history({ agent: f.agent || undefined, q: f.q || undefined, limit: 200, cursor }),
    (it) => it.decision.id,
  );
  return {
    ...pages,
    async exportAs(format) {
      const f = pages.filter();
      const blob = await api.exportHistory(format, { agent: f.agent || undefined, q: f.q || undefined });
      return { blob, filename: `countersign-history.${format}` };
    },
  };
}
