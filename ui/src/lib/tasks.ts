/** Recent tasks of every agent, newest change first: what the agents did,
 *  parked or not (the queue shows only those waiting for a decision). */
import type { Api, TaskSummary } from './api';
import { createPages, type PagesState, type PagesStore } from './pages';

export interface TasksFilter {
  agent: string;
}

export type TasksState = PagesState<TaskSummary, TasksFilter>;
export type TasksStore = PagesStore<TaskSummary, TasksFilter>;

export function createTasks(api: Api): TasksStore {
  return createPages<TaskSummary, TasksFilter>(
    { agent: '' },
    (f, cursor) => api.tasks({ agent: f.agent || undefined, limit: 200, cursor }),
    (t) => t.id,
  );
}
