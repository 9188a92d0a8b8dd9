/**
 * The running UI: one Api, the stores, the event stream wired to them, and
 * the route. Components get everything from here; none of them fetches.
 */
import { get, writable, type Readable, type Writable } from 'svelte/store';
import type { Api, ApiEvent, StorageState } from './api';
import { createChains, type ChainsStore } from './chains';
import { createHistory, type HistoryStore } from './history';
import { createTasks, type TasksStore } from './tasks';
import { createPeers, knows, nameOf, type PeersStore } from './peers';
import { createQueue, type QueueStore } from './queue';
import { createSettings, type SettingsStore } from './settings';
import { createTask, type TaskStore } from './task';
import { createNotifier } from './notify';

export type Screen = 'queue' | 'task' | 'tasks' | 'history' | 'agents' | 'chains' | 'settings';

export interface Route {
  screen: Screen;
  taskId?: string;
}

/** `#/queue`, `#/task/ID`, `#/history`, … */
export function parseRoute(hash: string): Route {
  const m = /^#\/([a-z]+)(?:\/(.+))?$/.exec(hash);
  if (!m) return { screen: 'queue' };
  const screen = m[1] as Screen;
  if (screen === 'task' && m[2]) return { screen, taskId: decodeURIComponent(m[2]) };
  if (['queue', 'tasks', 'history', 'agents', 'chains', 'settings'].includes(screen)) return { screen };
  return { screen: 'queue' };
}

export function routeHash(r: Route): string {
  return r.screen === 'task' && r.taskId ? `#/task/${encodeURIComponent(r.taskId)}` : `#/${r.screen}`;
}

export interface App {
  api: Api;
  queue: QueueStore;
  task: TaskStore;
  history: HistoryStore;
  /** Recent tasks of every agent (the Tasks screen). */
  tasks: TasksStore;
  peers: PeersStore;
  chains: ChainsStore;
  settings: SettingsStore;
  connected: Readable<boolean>;
  /** Whether the server can store (shown as a banner while it cannot). */
  storage: Readable<StorageState>;
  /** A one-line note for the next screen ("Approved … (delivered)"). */
  notice: Writable<string | null>;
  /** Ticks every few seconds, for live ages. */
  now: Readable<number>;
  /** Starts the event stream; returns a function that stops it. */
  start(): () => void;
  /** Events seen since start (for the status line and tests). */
  dispatch(ev: ApiEvent): void;
  resync(): void;
}

export function createApp(api: Api): App {
  const queue = createQueue(api);
  const task = createTask(api);
  const history = createHistory(api);
  const tasks = createTasks(api);
  const peers = createPeers(api);
  const chains = createChains(api);
  const settings = createSettings(api);
  const connected = writable(false);
  const storage = writable<StorageState>({ ok: true });
  const now = writable(Date.now());
  const notice = writable<string | null>(null);
  // A browser notification tells what the task asks; a click on it brings
  // this tab to the task.
  const notifier = createNotifier(
    undefined,
    undefined,
    (taskId) => {
      window.focus();
      location.hash = routeHash({ screen: 'task', taskId });
    },
    async (taskId, agentId) => {
      const [detail, agent] = await Promise.all([api.task(taskId), agentName(agentId).catch(() => '')]);
      return { agent, line: detail.openTurn?.preview };
    },
  );

  /** A served agent's or peer's name, as the agents screen shows it. */
  async function agentName(id: string): Promise<string> {
    // Read the agents and peers again only for one not yet known (added
    // since the last read); an id still unknown after that is shown as is.
    if (!knows(get(peers), id)) await peers.load();
    return nameOf(get(peers), id);
  }

  // A burst of events refreshes a list once, 300 ms after the first.
  const refreshHistory = coalesced(() => void history.refresh(), 300);
  const refreshTasks = coalesced(() => void tasks.refresh(), 300);
  function dispatch(ev: ApiEvent): void {
    if (ev.kind === 'storage') {
      storage.set(storageState(ev));
      return;
    }
    queue.onEvent(ev);
    task.onEvent(ev);
    chains.onEvent(ev);
    peers.onEvent(ev);
    notifier.onEvent(ev, get(settings).settings);
    // A task leaving the queue may be a decision made elsewhere: the
    // history gains a row.
    if (opened(get(history)) && ev.state && !/INPUT_REQUIRED|AUTH_REQUIRED/.test(ev.state)) refreshHistory();
    // Any task that changes moves to the top of the recent tasks.
    if (opened(get(tasks)) && ev.taskId && ev.state) refreshTasks();
  }

  function resync(): void {
    // Missed while the stream was down: read it again.
    void api
      .health()
      .then((h) => {
        if (h.storage) storage.set(storageState(h.storage));
      })
      .catch(() => {});
    void queue.resync();
    void task.reload();
    if (get(history).loaded) void history.refresh();
    if (get(tasks).loaded) void tasks.refresh();
    if (get(chains).loaded && !get(chains).unavailable) void chains.loadHops();
  }

  return {
    api,
    queue,
    task,
    history,
    tasks,
    peers,
    chains,
    settings,
    connected,
    storage,
    notice,
    now,
    dispatch,
    resync,
    start() {
      const stop = api.subscribe({
        onEvent: dispatch,
        onResync: resync,
        onStatus: (c) => connected.set(c),
      });
      const tick = setInterval(() => now.set(Date.now()), 5000);
      return () => {
        stop();
        clearInterval(tick);
      };
    },
  };
}

/** `run`, `ms` after the first of any number of calls made meanwhile. */
/** A paged list a screen has opened: read, or its first page being read.
 *  An event while that page is read may have come after the server
 *  answered it, so the list is read again too (once the page is in). */
function opened(s: { loaded: boolean; loading: boolean }): boolean {
  return s.loaded || s.loading;
}

export function coalesced(run: () => void, ms: number): () => void {
  let timer: ReturnType<typeof setTimeout> | null = null;
  return () => {
    if (timer) return;
    timer = setTimeout(() => {
      timer = null;
      run();
    }, ms);
  };
}

/** A storage notice (or `/api/health`'s `storage`) as the UI keeps it. */
export function storageState(v: Record<string, unknown>): StorageState {
  if (v.ok !== false) return { ok: true };
  return {
    ok: false,
    error: typeof v.error === 'string' ? v.error : undefined,
    sinceMs: typeof v.sinceMs === 'number' ? v.sinceMs : undefined,
  };
}
