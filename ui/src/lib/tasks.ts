/** Recent tasks of every agent, newest change first: what the agents did,
 *  parked or not (the queue shows only those waiting for a decision). */
import type { Api, TaskSummary } from './api';
import { createPages, type PagesState, type PagesStore } from './pages';

export interface TasksFilter {
  agent: string;
  /** A short state name (`failed`), or '' for every state. */
  state: string;
  /** Words every listed task's request (or id) holds, or '' for any. */
  q: string;
}

/** The states the list can be narrowed to, in the order a person thinks of them. */
export const TASK_STATES = [
  'working',
  'input-required',
  'auth-required',
  'completed',
  'failed',
  'rejected',
  'canceled',
  'submitted',
] as const;

export type TasksState = PagesState<TaskSummary, TasksFilter>;
export type TasksStore = PagesStore<TaskSummary, TasksFilter>;

export function createTasks(api: Api): TasksStore {
  return createPages<TaskSummary, TasksFilter>(
    { agent: '', state: '', q: '' },
    (f, cursor) =>
      api.tasks({ agent: f.agent || undefined, state: f.state || undefined, q: f.q || undefined, limit: 200, cursor }),
    (t) => t.id,
  );
}
