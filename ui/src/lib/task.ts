/**
 * The open task: its detail, kept fresh from events, and the decision taken
 * on it (with "already decided" and delivery failures kept visible).
 */
import { get, writable, type Readable } from 'svelte/store';
import { ApiError, type Api, type ApiEvent, type DecisionInput, type DecisionResult, type TaskDetail } from './api';

export interface TaskState {
  id: string | null;
  detail: TaskDetail | null;
  loading: boolean;
  error: string | null;
  /** Neither the database nor the archive holds the task: no retry helps. */
  gone: boolean;
  /** The last decision attempt on this task, as the bar shows it. */
  result: DecisionResult | null;
  deciding: boolean;
  /** The last input sent, for a retry after a failure. */
  lastInput: DecisionInput | null;
  /** Why the last side action (a delivery retry) failed. */
  actionError: string | null;
}

export interface TaskStore extends Readable<TaskState> {
  open(id: string): Promise<void>;
  close(): void;
  reload(): Promise<void>;
  onEvent(ev: ApiEvent): void;
  decide(input: DecisionInput): Promise<DecisionResult | null>;
  retry(): Promise<DecisionResult | null>;
  /** Sends a decision whose delivery failed again. */
  retryDelivery(decisionId: string): Promise<void>;
}

const initial = (): TaskState => ({
  id: null,
  detail: null,
  loading: false,
  error: null,
  gone: false,
  result: null,
  deciding: false,
  lastInput: null,
  actionError: null,
});

export function createTask(api: Api): TaskStore {
  const store = writable<TaskState>(initial());
  const { subscribe, update, set } = store;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let generation = 0;

  /** Drops a re-read the events of a task asked for: that task is no longer open. */
  function cancelReread(): void {
    if (timer) clearTimeout(timer);
    timer = null;
  }

  async function fetchDetail(id: string, quiet: boolean): Promise<void> {
    // Only the open task is read: a late read of one left behind would
    // otherwise supersede the read of the one now open, which never lands.
    if (get(store).id !== id) return;
    const gen = ++generation;
    if (!quiet) update((s) => ({ ...s, loading: true, error: null, gone: false }));
    const notFound = (e: unknown) => e instanceof ApiError && e.status === 404;
    try {
      let detail: TaskDetail;
      try {
        detail = await api.task(id);
      } catch (e) {
        // A task retention archived is read from the archive, read-only.
        if (!notFound(e)) throw e;
        detail = await api.archivedTask(id);
      }
      if (gen !== generation || get(store).id !== id) return;
      update((s) => ({ ...s, detail, loading: false, error: null, gone: false }));
    } catch (e) {
      if (gen !== generation || get(store).id !== id) return;
      update((s) => ({ ...s, loading: false, error: (e as Error).message, gone: notFound(e) }));
    }
  }

  async function decide(input: DecisionInput): Promise<DecisionResult | null> {
    const s = get(store);
    if (!s.id || s.deciding) return null;
    const id = s.id;
    const turnId = s.detail?.openTurn?.id;
    const body = turnId && !input.turnId ? { ...input, turnId } : input;
    update((x) => ({ ...x, deciding: true, lastInput: body }));
    const result = await api.decide(id, body);
    if (get(store).id !== id) return result;
    update((x) => ({ ...x, deciding: false, result }));
    await fetchDetail(id, true);
    return result;
  }

  return {
    subscribe,
    async open(id) {
      const cur = get(store);
      if (cur.id === id && cur.loading) return;
      if (cur.id === id && cur.detail) return fetchDetail(id, true);
      cancelReread();
      set({ ...initial(), id, loading: true });
      await fetchDetail(id, false);
    },
    close() {
      cancelReread();
      generation++;
      set(initial());
    },
    async reload() {
      const id = get(store).id;
      if (id) await fetchDetail(id, true);
    },
    onEvent(ev) {
      const id = get(store).id;
      if (!id || ev.taskId !== id || timer) return;
      timer = setTimeout(() => {
        timer = null;
        void fetchDetail(id, true);
      }, 100);
    },
    decide,
    async retry() {
      const last = get(store).lastInput;
      return last ? decide(last) : null;
    },
    async retryDelivery(decisionId) {
      const id = get(store).id;
      try {
        const { items } = await api.outbox(true);
        const item = items.find((o) => o.refId === decisionId);
        if (!item) throw new Error('no failed delivery of this decision is waiting');
        await api.retryDelivery(item.id);
        update((s) => ({ ...s, actionError: null }));
      } catch (e) {
        update((s) => ({ ...s, actionError: `Retry failed: ${(e as Error).message}` }));
      }
      if (id) await fetchDetail(id, true);
    },
  };
}
