/**
 * Tells the person a task is waiting, as their settings ask: a browser
 * notification (the desktop shell shows OS notifications itself) that opens
 * the task when clicked. Only for tasks newly parked while the UI runs,
 * never for what was already there.
 */
import type { ApiEvent, Settings } from './api';

const PARKED = /INPUT_REQUIRED|AUTH_REQUIRED/;

export interface Notifier {
  onEvent(ev: ApiEvent, settings: Settings): void;
}

type NotificationCtor = {
  new (title: string, opts?: { body?: string; tag?: string; silent?: boolean }): { onclick: (() => void) | null };
  permission: string;
};

export interface Description {
  agent?: string;
  line?: string;
}

export function createNotifier(
  ctor: NotificationCtor | undefined = (globalThis as { Notification?: NotificationCtor }).Notification,
  isHidden: () => boolean = () => document.hidden,
  /** Called with the task of a notification the person clicks. */
  open: (taskId: string) => void = () => {},
  /** The agent's name for people (title) and the first line of what the
   * task asks (body); what is empty falls back to the agent's id and what
   * the task waits for. */
  describe: (taskId: string, agentId: string) => Promise<Description> = async () => ({}),
): Notifier {
  const told = new Set<string>();
  return {
    onEvent(ev, s) {
      if (!ctor || ctor.permission !== 'granted' || !s.notifications.enabled) return;
      if (!ev.taskId || !ev.state || !PARKED.test(ev.state) || ev.kind !== 'task' && ev.kind !== 'statusUpdate') return;
      if (s.notifications.onlyWhenHidden && !isHidden()) return;
      if (ev.agentId && s.notifications.mutedAgents?.includes(ev.agentId)) return;
      const key = `${ev.taskId}:${ev.state}`;
      if (told.has(key)) return;
      told.add(key);
      const what = /AUTH/.test(ev.state) ? 'asks you to sign in' : 'waits for your decision';
      const taskId = ev.taskId;
      const agentId = ev.agentId ?? '';
      const show = (d: Description) => {
        // As the desktop app's: the agent as title, the request as body.
        const agent = d.agent || agentId || 'An agent';
        const shown = new ctor(agent, { body: d.line || `${agent} ${what}`, tag: taskId, silent: !s.notifications.sound });
        // A click opens the task.
        shown.onclick = () => open(taskId);
      };
      describe(taskId, agentId).then(show, () => show({}));
    },
  };
}

/** Asks for permission, from a click (browsers allow it only then). */
export async function askPermission(): Promise<string> {
  const n = (globalThis as { Notification?: { requestPermission?: () => Promise<string>; permission?: string } }).Notification;
  if (!n?.requestPermission) return 'unsupported';
  try {
    return await n.requestPermission();
  } catch {
    return n.permission ?? 'denied';
  }
}
