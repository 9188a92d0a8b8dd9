/**
 * The keyboard map: one list, shown by `?` and read by the handlers, so the
 * help never disagrees with what the keys do.
 */
export interface KeyHelp {
  keys: string;
  what: string;
  /** The screens where the key works: `everywhere`, or the screens' names. */
  where: string;
}

export const KEYS: KeyHelp[] = [
  { keys: 'j / k', what: 'next / previous item', where: 'queue, task, tasks, history' },
  { keys: 'Enter', what: 'open the focused task', where: 'queue, tasks, history' },
  { keys: 'a', what: 'approve (then Enter; optional comment)', where: 'queue, task' },
  { keys: 'r', what: 'reply (Ctrl+Enter sends)', where: 'queue, task' },
  { keys: 'x', what: 'reject (then Enter; optional reason)', where: 'queue, task' },
  { keys: 'Space', what: 'select / unselect for a bulk decision', where: 'queue' },
  { keys: 'Shift+A', what: 'select all loaded', where: 'queue' },
  { keys: 'o', what: 'open the sign-in link (auth-required)', where: 'task' },
  { keys: 'c', what: 'continue after signing in', where: 'task' },
  { keys: 'n', what: 'new chain rule', where: 'chains' },
  { keys: 'Esc', what: 'cancel, close, back to the queue', where: 'everywhere' },
  { keys: '/', what: 'search (in the box: Enter searches now, Esc clears)', where: 'queue, tasks, history' },
  { keys: 'g q', what: 'go to the queue', where: 'everywhere' },
  { keys: 'g t', what: 'go to the recent tasks', where: 'everywhere' },
  { keys: 'g h', what: 'go to the history', where: 'everywhere' },
  { keys: 'g a', what: 'go to agents & peers', where: 'everywhere' },
  { keys: 'g c', what: 'go to chains', where: 'everywhere' },
  { keys: 'g s', what: 'go to settings', where: 'everywhere' },
  { keys: '?', what: 'show these keys', where: 'everywhere' },
];

/** Whether a key event comes from a field where typing is text. */
export function isTyping(target: EventTarget | null): boolean {
  const el = target as HTMLElement | null;
  if (!el || !el.tagName) return false;
  const tag = el.tagName;
  return tag === 'INPUT' || tag === 'TEXTAREA' || tag === 'SELECT' || el.isContentEditable;
}

/** Tracks two-key sequences (`g` then a letter). */
export class Chord {
  private pending: string | null = null;
  private at = 0;
  constructor(private readonly windowMs = 1200) {}

  /** Returns the full chord (`g q`) when `key` completes one, `null` otherwise. */
  feed(key: string, nowMs: number): string | null {
    if (this.pending && nowMs - this.at <= this.windowMs) {
      const c = `${this.pending} ${key}`;
      this.pending = null;
      return c;
    }
    this.pending = null;
    if (key === 'g') {
      this.pending = 'g';
      this.at = nowMs;
    }
    return null;
  }

  get waiting(): boolean {
    return this.pending !== null;
  }
}
