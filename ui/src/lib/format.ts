/** Small presentation helpers: ages, times, sizes. No HTML. */

export function age(fromMs: number, nowMs: number): string {
  const s = Math.max(0, Math.floor((nowMs - fromMs) / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h`;
  return `${Math.floor(h / 24)}d`;
}

type When = number | string | null | undefined;

/** `ms` as a date, or what to show instead: nothing, or `ms` as it is. */
function dateOf(ms: When): Date | string {
  if (ms === null || ms === undefined || ms === '') return '';
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? String(ms) : d;
}

export function time(ms: When): string {
  const d = dateOf(ms);
  if (typeof d === 'string') return d;
  return d.toLocaleString(undefined, {
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });
}

/**
 * A compact time for dense tables: the clock time for today, the day and
 * minute for this year, the date before that. [`time`] gives the whole.
 */
export function shortTime(ms: When, nowMs: number = Date.now()): string {
  const d = dateOf(ms);
  if (typeof d === 'string') return d;
  const now = new Date(nowMs);
  if (d.toDateString() === now.toDateString()) {
    return d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  }
  if (d.getFullYear() === now.getFullYear()) {
    return d.toLocaleString(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
  }
  return d.toLocaleDateString(undefined, { year: 'numeric', month: 'short', day: 'numeric' });
}

/** Where a decision was made, in words: `in the app`, `from the CLI`, `by ACTOR`. */
export function actorLabel(actor: string): string {
  if (actor === 'ui') return 'in the app';
  if (actor === 'cli') return 'from the CLI';
  return `by ${actor}`;
}

/** How far a decision's answer to the agent has got, in words. */
export function deliveryState(delivery: string): string {
  if (delivery === 'delivered') return 'delivered to the agent';
  if (delivery === 'pending') return 'being delivered to the agent';
  if (delivery === 'failed') return 'its delivery failed (see Decisions)';
  return `delivery ${delivery}`;
}

export function size(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined) return 'size unknown';
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

export function stateLabel(state: string): string {
  const s = state.startsWith('TASK_STATE_') ? state.slice(11).toLowerCase().replace(/_/g, '-') : state;
  if (s === 'input-required') return 'input';
  if (s === 'auth-required') return 'auth';
  return s;
}

/** What an outbox item (`GET /api/outbox`) carries, in words. */
export function deliveryLabel(kind: string): string {
  switch (kind) {
    case 'decision':
      return 'decision';
    case 'push':
      return 'push notification';
    case 'chain':
      return 'chain hop';
    case 'reread':
      return 're-read of a pushed task';
    case 'start':
      return 'task sent to a peer';
    default:
      return kind;
  }
}

/** base64 of a file's bytes, for decisions with attachments. */
export async function fileToBase64(file: Blob): Promise<string> {
  const buf = new Uint8Array(await file.arrayBuffer());
  let bin = '';
  const chunk = 0x8000;
  for (let i = 0; i < buf.length; i += chunk) {
    bin += String.fromCharCode(...buf.subarray(i, i + chunk));
  }
  return btoa(bin);
}

/** Saves a blob as a download without navigating away. */
export function download(blob: Blob, filename: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  a.rel = 'noopener';
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

export async function copy(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // Clipboard API refused (not a secure context): select-and-copy fallback.
    const ta = document.createElement('textarea');
    ta.value = text;
    ta.setAttribute('readonly', '');
    ta.className = 'offscreen';
    document.body.appendChild(ta);
    ta.select();
    let ok = false;
    try {
      ok = document.execCommand('copy');
    } catch {
      ok = false;
    }
    ta.remove();
    return ok;
  }
}
