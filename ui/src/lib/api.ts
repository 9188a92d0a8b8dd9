/**
 * The one module that knows how the UI reaches Countersign.
 *
 * Two transports sit behind one interface ({@link Transport}):
 *
 * - **HTTP** (the browser, `countersign serve`): `fetch` of `/api/…` with
 *   `Authorization: Bearer <token>`, and the event stream `GET /api/events`
 *   read with `fetch` + `ReadableStream` (EventSource cannot send headers).
 *   The stream reconnects with backoff; once it is open, first or again,
 *   the UI re-reads what it shows (`onResync`), and events already seen are
 *   dropped.
 *
 * - **Tauri** (the desktop window; used when `window.__TAURI_INTERNALS__`
 *   exists). The desktop shell must provide exactly this contract:
 *
 *   - command `api`, called as `invoke('api', { method, path, body })` where
 *     `method` is `GET|POST|PUT|DELETE`, `path` starts with `/api/` (query
 *     string included) or is a served agent's card
 *     (`/a2a/{id}/.well-known/agent-card.json`), and `body` is a JSON value
 *     or `null`. It resolves to
 *     `{ status: number, contentType: string, body: unknown }`: `body` is the
 *     parsed JSON when the answer is JSON, else `{ base64: string }` holding
 *     the raw bytes (file downloads, exports). It answers exactly what the
 *     HTTP route of the same method and path answers (errors included, as
 *     `{status: 4xx|5xx, body: {error: {code, message}}}`); it rejects only
 *     when the request could not be made at all.
 *   - event `api-event`, emitted once per event of `GET /api/events`, with
 *     that event's `data` JSON as its payload (`{taskId, agentId, seq,
 *     state, kind}`, or `{kind: "chain", …}`).
 *
 *   - links: the UI opens agents' links (a sign-in link, a link in agent
 *     content) with `window.open(url, '_blank', 'noopener,noreferrer')`,
 *     only for `http:`, `https:` and `mailto:`; the shell must open such
 *     new-window requests in the system browser, never in its own window.
 *
 * Nothing else in the UI calls `fetch`, `invoke` or `listen`.
 */

export type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

/** One answer of the UI API, whichever transport carried it. */
export interface Reply {
  status: number;
  contentType: string;
  /** Parsed JSON, or `null` for an empty body. */
  body: unknown;
  /** The raw bytes for answers that are not JSON. */
  blob?: Blob;
}

/** One event of `/api/events`. */
export interface ApiEvent {
  taskId?: string;
  agentId?: string;
  seq?: number;
  /** `TASK_STATE_…` for task events. */
  state?: string;
  /** `task`, `message`, `statusUpdate`, `artifactUpdate`, `chain`, `peer`
   * (`{peerId, held, changed}`: a peer held for a changed card, or released),
   * or `storage` (a {@link StorageState}: writes started or stopped failing). */
  kind: string;
  [key: string]: unknown;
}

/** Whether the server can store: while `ok` is false (a full disk), new
 * tasks and decisions are refused, with SQLite's reason in `error`. */
export interface StorageState {
  ok: boolean;
  error?: string;
  sinceMs?: number;
}

export interface EventHandlers {
  onEvent(ev: ApiEvent): void;
  /** The stream is open (first, or again after a break): re-read what is shown. */
  onResync(): void;
  /** `true` while the stream is open. */
  onStatus?(connected: boolean): void;
}

/** How requests and events travel. */
export interface Transport {
  request(method: Method, path: string, body?: unknown): Promise<Reply>;
  /** Starts delivering events; returns a function that stops. */
  subscribe(handlers: EventHandlers): () => void;
}

/** A UI API answer that was not a success, with the server's message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly body: unknown = null,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** The message in `{error: {message}}`, or a fallback. */
export function errorMessage(status: number, body: unknown): string {
  const e = (body as { error?: { message?: unknown } } | null)?.error;
  if (e && typeof e.message === 'string') return e.message;
  if (status === 0) return 'Countersign cannot be reached';
  return `request failed (HTTP ${status})`;
}

/** Drops events already delivered, by task and sequence number. */
export class Dedupe {
  private seen = new Set<string>();
  private order: string[] = [];
  constructor(private readonly cap = 5000) {}

  /** `true` the first time an event is offered; events without a seq always pass. */
  fresh(ev: ApiEvent): boolean {
    if (ev.seq === undefined || ev.seq === null) return true;
    const key = `${ev.kind === 'chain' ? 'chain' : (ev.taskId ?? '')}:${ev.seq}:${ev.kind}`;
    if (this.seen.has(key)) return false;
    this.seen.add(key);
    this.order.push(key);
    if (this.order.length > this.cap) {
      const old = this.order.shift();
      if (old !== undefined) this.seen.delete(old);
    }
    return true;
  }
}

/**
 * Splits a text/event-stream into events' `data`. Feed it chunks as they
 * come; it returns the complete events' data fields.
 */
export class SseParser {
  private buf = '';
  private data: string[] = [];

  push(chunk: string): string[] {
    this.buf += chunk;
    const out: string[] = [];
    let nl: number;
    while ((nl = this.buf.search(/\r\n|\r|\n/)) >= 0) {
      const line = this.buf.slice(0, nl);
      const sep = this.buf.startsWith('\r\n', nl) ? 2 : 1;
      // A lone \r at the end of the buffer may be half of \r\n: wait.
      if (this.buf[nl] === '\r' && nl + 1 === this.buf.length) break;
      this.buf = this.buf.slice(nl + sep);
      if (line === '') {
        if (this.data.length) out.push(this.data.join('\n'));
        this.data = [];
      } else if (line.startsWith('data:')) {
        this.data.push(line.slice(5).replace(/^ /, ''));
      }
      // Comments (keep-alives), `id:`, `event:` and `retry:` are not used.
    }
    return out;
  }
}

const RECONNECT_MIN_MS = 500;
const RECONNECT_MAX_MS = 10_000;

/** The browser transport: fetch with the bearer token. */
export class HttpTransport implements Transport {
  constructor(
    private readonly token: string,
    private readonly base = '',
    private readonly fetchFn: typeof fetch = (...a) => fetch(...a),
  ) {}

  private headers(json: boolean, path = '/api/'): Record<string, string> {
    // The token is for the UI API only: an agent card is public, and A2A
    // routes would refuse a token that is not an A2A credential.
    const h: Record<string, string> = path.startsWith('/api/') ? { Authorization: `Bearer ${this.token}` } : {};
    if (json) h['Content-Type'] = 'application/json';
    return h;
  }

  async request(method: Method, path: string, body?: unknown): Promise<Reply> {
    let resp: Response;
    try {
      resp = await this.fetchFn(this.base + path, {
        method,
        headers: this.headers(body !== undefined, path),
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: 'no-store',
      });
    } catch {
      return { status: 0, contentType: '', body: null };
    }
    const contentType = resp.headers.get('content-type') ?? '';
    if (contentType.startsWith('application/json')) {
      const text = await resp.text();
      let parsed: unknown = null;
      try {
        parsed = text ? JSON.parse(text) : null;
      } catch {
        parsed = null;
      }
      return { status: resp.status, contentType, body: parsed };
    }
    const blob = await resp.blob();
    return { status: resp.status, contentType, body: null, blob };
  }

  subscribe(h: EventHandlers): () => void {
    let stopped = false;
    let controller: AbortController | null = null;
    let delay = RECONNECT_MIN_MS;
    const dedupe = new Dedupe();
    let timer: ReturnType<typeof setTimeout> | null = null;

    const run = async (): Promise<void> => {
      if (stopped) return;
      controller = new AbortController();
      try {
        const resp = await this.fetchFn(this.base + '/api/events', {
          headers: { ...this.headers(false), Accept: 'text/event-stream' },
          signal: controller.signal,
          cache: 'no-store',
        });
        if (!resp.ok || !resp.body) throw new Error(`HTTP ${resp.status}`);
        h.onStatus?.(true);
        delay = RECONNECT_MIN_MS;
        // Re-read on every connect, the first included: what the screens
        // read before the stream was open (the app's first load races it)
        // misses any change made in between, and no event will tell of it.
        h.onResync();
        const reader = resp.body.getReader();
        const decoder = new TextDecoder();
        const parser = new SseParser();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          for (const data of parser.push(decoder.decode(value, { stream: true }))) {
            let ev: ApiEvent;
            try {
              ev = JSON.parse(data) as ApiEvent;
            } catch {
              continue;
            }
            if (dedupe.fresh(ev)) h.onEvent(ev);
          }
        }
      } catch {
        // Reconnect below.
      }
      if (stopped) return;
      h.onStatus?.(false);
      timer = setTimeout(() => void run(), delay);
      delay = Math.min(delay * 2, RECONNECT_MAX_MS);
    };
    void run();
    return () => {
      stopped = true;
      if (timer) clearTimeout(timer);
      controller?.abort();
    };
  }
}

type Invoke = (cmd: string, args: Record<string, unknown>) => Promise<unknown>;
type Listen = (
  event: string,
  cb: (e: { payload: unknown }) => void,
) => Promise<() => void>;

/** The desktop transport: the shell's `api` command and `api-event` event. */
export class TauriTransport implements Transport {
  constructor(
    private readonly invoke: Invoke,
    private readonly listen: Listen,
  ) {}

  async request(method: Method, path: string, body?: unknown): Promise<Reply> {
    let r: { status: number; contentType?: string; body: unknown };
    try {
      r = (await this.invoke('api', { method, path, body: body ?? null })) as typeof r;
    } catch {
      return { status: 0, contentType: '', body: null };
    }
    const contentType = r.contentType ?? 'application/json';
    const raw = r.body as { base64?: unknown } | null;
    if (raw && typeof raw === 'object' && typeof raw.base64 === 'string') {
      const bin = atob(raw.base64);
      const bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      return { status: r.status, contentType, body: null, blob: new Blob([bytes], { type: contentType }) };
    }
    return { status: r.status, contentType, body: r.body ?? null };
  }

  subscribe(h: EventHandlers): () => void {
    const dedupe = new Dedupe();
    let unlisten: (() => void) | null = null;
    let stopped = false;
    void this.listen('api-event', (e) => {
      const ev = e.payload as ApiEvent;
      if (ev && typeof ev === 'object' && dedupe.fresh(ev)) h.onEvent(ev);
    }).then((u) => {
      if (stopped) u();
      else {
        unlisten = u;
        h.onStatus?.(true);
        // Changes made before the listener was in place sent no event here.
        h.onResync();
      }
    });
    return () => {
      stopped = true;
      unlisten?.();
    };
  }
}

// ---------------------------------------------------------------------------
// The UI API's shapes, as the screens use them.

export type ShortState = 'input-required' | 'auth-required' | string;

export interface Turn {
  id: string;
  taskId: string;
  /** `{id}`, or `{tenant}/{id}` for an agent of a tenant. */
  agentId: string;
  /** The agent's tenant; absent in the default tenant. */
  tenant?: string;
  source: string;
  state: ShortState;
  preview: string;
  openedMs: number;
  closedMs: number | null;
  outcome: string | null;
}

export interface QueuePage {
  items: Turn[];
  total: number;
  counts: Record<string, number>;
  nextCursor?: string;
}

export interface QueueQuery {
  agent?: string;
  state?: string;
  q?: string;
  sort?: 'oldest' | 'newest';
  limit?: number;
  cursor?: string;
}

export interface Decision {
  id: string;
  turnId: string;
  taskId: string;
  agentId: string;
  kind: string;
  payload: unknown;
  actor: string;
  createdMs: number;
  delivery: 'pending' | 'delivered' | 'failed' | string;
  deliveryError: string | null;
  deliveredMs: number | null;
}

export type RenderedPart =
  | { kind: 'text'; html: string; mediaType: string | null }
  | { kind: 'markdown'; html: string }
  | { kind: 'data'; json: string; mediaType: string | null }
  | { kind: 'file'; filename: string | null; mediaType: string | null; size: number | null; url: string };

export interface RenderedMessage {
  messageId: string;
  role: string;
  parts: RenderedPart[];
}

export interface RenderedArtifact {
  artifactId: string;
  name: string | null;
  description: string | null;
  parts: RenderedPart[];
}

/** One hop seen from a task: the task on its other end (none for a push,
 *  or before the hop went out), the rule, and how it went. */
export interface ChainLink {
  hopId?: string;
  ruleId: string;
  taskId: string | null;
  state?: string;
  reason?: string | null;
  /** Set when the task on the other end has been archived (no longer here). */
  archived?: boolean;
}

export interface ChainLinks {
  parent: ChainLink | null;
  children: ChainLink[];
}

export interface TaskDetail {
  task: {
    id: string;
    contextId: string;
    status: { state: string; timestamp?: string };
    metadata?: Record<string, unknown>;
  };
  agentId: string;
  tenant?: string;
  dialect: string;
  turns: Turn[];
  decisions: Decision[];
  openTurn?: Turn;
  rendered: {
    history: RenderedMessage[];
    status: { state: string; timestamp?: string; message: RenderedMessage | null };
    artifacts: RenderedArtifact[];
  };
  chain?: ChainLinks;
  /** The task this one goes on in: its peer answered the decision with a new task. */
  continuedIn?: string;
  /** The task this one continues (see `continuedIn`). */
  continues?: string;
  /** Set when the task this one continues has been archived (no longer here). */
  continuesArchived?: boolean;
  /** Set on a task read from the archive: when retention moved it there. */
  archivedAt?: string;
}

export interface AttachedFile {
  name: string;
  mediaType?: string;
  /** base64 */
  bytes: string;
}

export interface DecisionInput {
  kind: 'approve' | 'reply' | 'reject' | 'continue';
  text?: string;
  data?: unknown;
  files?: AttachedFile[];
  turnId?: string;
}

/** What became of a decision. */
export type DecisionResult =
  | { ok: true; decision: Decision }
  | { ok: false; alreadyDecided: true; decision: Decision; message: string }
  | { ok: false; alreadyDecided: false; status: number; message: string };

export interface HistoryItem {
  decision: Decision;
  turn: Turn;
}

export interface HistoryPage {
  items: HistoryItem[];
  nextCursor?: string;
}

/** A task as the list of recent tasks shows it (`GET /api/tasks`). */
export interface TaskSummary {
  id: string;
  agentId: string;
  /** Short state name: `completed`, `input-required`, … */
  state: string;
  /** The first line of what its caller asked. */
  preview: string;
  updatedMs: number;
  /** Waiting in the queue for a decision. */
  parked: boolean;
}

export interface TaskPage {
  items: TaskSummary[];
  nextCursor?: string;
  /** With `q`: how many tasks the page read (at most 5,000; a page that read
   *  that many may hold fewer items, and its cursor searches older ones). */
  searched?: number;
}

export interface Agent {
  /** `{id}`, or `{tenant}/{id}` for an agent of a tenant. */
  id: string;
  tenant?: string;
  name: string;
  description: string;
  backend: string;
  cardUrl: string;
  url: string;
}

export interface Peer {
  id: string;
  url: string;
  name: string | null;
  rejectWith: string;
  decisionFormat: string;
  card: Record<string, unknown> | null;
  cardMs: number | null;
  fromConfig: boolean;
  createdMs: number;
  /** The card fingerprint trusted on first use (or accepted since). */
  pin?: PeerPin | null;
  /** Set while the peer's card differs from `pin`: its work is held. */
  cardChange?: PeerCardChange | null;
}

export interface PeerPin {
  identity: { name: string; url: string };
  skills: string[];
  auth: string[];
  key: string | null;
}

export interface PeerCardChange {
  changed: Array<'identity' | 'skills' | 'auth' | 'key'>;
  old: PeerPin;
  new: PeerPin;
  atMs: number;
}

export interface NewPeer {
  url: string;
  id?: string;
  name?: string;
  bearer?: string;
  apiKey?: string;
  apiKeyHeader?: string;
}

export interface PeerSubscription {
  id: string;
  peerId: string;
  url: string;
  token: string;
}

export interface OutboxItem {
  id: string;
  kind: string;
  refId: string;
  peerId: string | null;
  attempts: number;
  status: string;
  lastError: string | null;
  createdMs: number;
  doneMs: number | null;
}

export type ChainTrigger = {
  agent: string | null;
  peer: string | null;
  states: string[];
  skill: string | null;
};

export type ChainAction =
  | {
      kind: 'push';
      url: string;
      authScheme: string | null;
      credentials: string | null;
      token: string | null;
    }
  | {
      kind: 'send';
      peer: string;
      template: string;
      context: 'new' | 'same';
      artifacts: boolean;
    };

export interface ChainRule {
  id: string;
  source: 'api' | 'config';
  enabled: boolean;
  gate: boolean;
  trigger: ChainTrigger;
  action: ChainAction;
}

export type NewChainRule = Omit<ChainRule, 'source' | 'id'> & { id?: string };

export interface ChainHop {
  id: string;
  ruleId: string;
  parentTaskId: string;
  childTaskId: string | null;
  state: 'gated' | 'pending' | 'delivered' | 'failed' | 'refused' | string;
  reason: string | null;
  createdAt: string;
  updatedAt: string;
  /** Whose task fired the hop and what it was asked (null once the task is deleted). */
  parent?: TaskLabel | null;
  /** The same of the task the hop started, if any. */
  child?: TaskLabel | null;
}

/** Who a task belongs to and the first line of its first request. */
export interface TaskLabel {
  agentId: string;
  preview: string;
}

export interface Settings {
  bind: string | null;
  webhookPublicUrl: string | null;
  notifications: { enabled: boolean; sound: boolean; onlyWhenHidden: boolean; mutedAgents?: string[] };
  theme: 'system' | 'light' | 'dark';
}

/** What the server runs with now, beside the saved settings. */
export interface SettingsReply {
  settings: Settings;
  effective: { bind: string; webhookBase: string; publicUrl: string | null };
}

function qs(params: Record<string, string | number | boolean | undefined | null>): string {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') u.set(k, String(v));
  }
  const s = u.toString();
  return s ? `?${s}` : '';
}

const enc = encodeURIComponent;

/** The UI API, typed, over whichever transport. */
export class Api {
  constructor(readonly transport: Transport) {}

  private async call<T>(method: Method, path: string, body?: unknown): Promise<T> {
    const r = await this.transport.request(method, path, body);
    if (r.status < 200 || r.status >= 300) {
      throw new ApiError(r.status, errorMessage(r.status, r.body), r.body);
    }
    return r.body as T;
  }

  health(): Promise<{ ok: boolean; version: string; storage?: Record<string, unknown> }> {
    return this.call('GET', '/api/health');
  }

  queue(q: QueueQuery = {}): Promise<QueuePage> {
    return this.call('GET', '/api/queue' + qs({ ...q }));
  }

  task(id: string): Promise<TaskDetail> {
    return this.call('GET', `/api/tasks/${enc(id)}`);
  }

  /** A task retention archived, read-only (`archivedAt` set); 404 when the archive does not hold it. */
  archivedTask(id: string): Promise<TaskDetail> {
    return this.call('GET', `/api/archives/tasks/${enc(id)}`);
  }

  /** Decides a parked task; "already decided" is an answer, not an error. */
  async decide(id: string, input: DecisionInput): Promise<DecisionResult> {
    const r = await this.transport.request('POST', `/api/tasks/${enc(id)}/decision`, input);
    const body = r.body as { decision?: Decision } | null;
    if (r.status >= 200 && r.status < 300 && body?.decision) {
      return { ok: true, decision: body.decision };
    }
    if (r.status === 409 && body?.decision) {
      return { ok: false, alreadyDecided: true, decision: body.decision, message: errorMessage(r.status, r.body) };
    }
    return { ok: false, alreadyDecided: false, status: r.status, message: errorMessage(r.status, r.body) };
  }

  /** A file part's bytes (path as the API rendered it). */
  async file(path: string): Promise<Blob> {
    if (!path.startsWith('/api/')) throw new ApiError(400, 'not a UI API file');
    const r = await this.transport.request('GET', path);
    if (r.status !== 200) throw new ApiError(r.status, errorMessage(r.status, r.body), r.body);
    return r.blob ?? new Blob([JSON.stringify(r.body)], { type: 'application/json' });
  }

  /** Recent tasks of every agent (or of one, in one state, holding the words
   *  of `q`), newest change first. */
  tasks(q: { agent?: string; state?: string; q?: string; limit?: number; cursor?: string } = {}): Promise<TaskPage> {
    return this.call('GET', '/api/tasks' + qs(q));
  }

  history(q: { agent?: string; q?: string; limit?: number; cursor?: string } = {}): Promise<HistoryPage> {
    return this.call('GET', '/api/history' + qs(q));
  }

  async exportHistory(format: 'jsonl' | 'csv', q: { agent?: string; q?: string } = {}): Promise<Blob> {
    const r = await this.transport.request('GET', '/api/history/export' + qs({ format, ...q }));
    if (r.status !== 200) throw new ApiError(r.status, errorMessage(r.status, r.body), r.body);
    return r.blob ?? new Blob([JSON.stringify(r.body)]);
  }

  agents(): Promise<{ agents: Agent[] }> {
    return this.call('GET', '/api/agents');
  }

  /** A served agent's public card (as a caller without `A2A-Version` sees it). */
  agentCard(agentId: string): Promise<Record<string, unknown>> {
    // A tenant's agent is `{tenant}/{id}`: two path segments.
    const path = agentId.split('/').map(enc).join('/');
    return this.call('GET', `/a2a/${path}/.well-known/agent-card.json`);
  }

  peers(): Promise<{ peers: Peer[] }> {
    return this.call('GET', '/api/peers');
  }

  /** A would-be peer's card, read now and not stored. */
  previewPeer(p: NewPeer): Promise<{ card: Record<string, unknown> }> {
    return this.call('POST', '/api/peers/preview', p);
  }

  addPeer(p: NewPeer): Promise<{ peer: Peer }> {
    return this.call('POST', '/api/peers', p);
  }

  removePeer(id: string): Promise<unknown> {
    return this.call('DELETE', `/api/peers/${enc(id)}`);
  }

  refreshPeer(id: string): Promise<{ peer: Peer; card: Record<string, unknown> }> {
    return this.call('POST', `/api/peers/${enc(id)}/refresh`);
  }

  /** Accepts the peer's changed card; its held work goes out. */
  trustPeer(id: string): Promise<{ peer: Peer }> {
    return this.call('POST', `/api/peers/${enc(id)}/trust`);
  }

  subscribePeer(id: string): Promise<PeerSubscription> {
    return this.call('POST', `/api/peers/${enc(id)}/subscriptions`);
  }

  outbox(failed = false): Promise<{ items: OutboxItem[] }> {
    return this.call('GET', '/api/outbox' + qs({ failed: failed || undefined }));
  }

  /** Tries a failed delivery again, now. */
  retryDelivery(id: string): Promise<unknown> {
    return this.call('POST', `/api/outbox/${enc(id)}/retry`);
  }

  chains(): Promise<{ rules: ChainRule[] }> {
    return this.call('GET', '/api/chains');
  }

  addChain(rule: NewChainRule): Promise<{ rule: ChainRule }> {
    return this.call('POST', '/api/chains', rule);
  }

  updateChain(id: string, rule: NewChainRule): Promise<{ rule: ChainRule }> {
    return this.call('PUT', `/api/chains/${enc(id)}`, rule);
  }

  removeChain(id: string): Promise<unknown> {
    return this.call('DELETE', `/api/chains/${enc(id)}`);
  }

  hops(limit = 50): Promise<{ hops: ChainHop[] }> {
    return this.call('GET', '/api/chains/hops' + qs({ limit }));
  }

  releaseHop(id: string): Promise<unknown> {
    return this.call('POST', `/api/chains/hops/${enc(id)}/release`);
  }

  dropHop(id: string): Promise<unknown> {
    return this.call('POST', `/api/chains/hops/${enc(id)}/drop`);
  }

  settings(): Promise<SettingsReply> {
    return this.call('GET', '/api/settings');
  }

  saveSettings(s: Settings): Promise<SettingsReply> {
    return this.call('PUT', '/api/settings', s);
  }

  subscribe(h: EventHandlers): () => void {
    return this.transport.subscribe(h);
  }
}

const TOKEN_KEY = 'countersign.token';

/**
 * The token for the HTTP transport: from the address's fragment
 * (`#token=…`, as `countersign serve` prints it), then kept in
 * sessionStorage and removed from the address bar.
 */
export function takeToken(loc: Location, storage: Storage, history: History): string | null {
  const m = /(?:^#|&)token=([^&]+)/.exec(loc.hash);
  if (m) {
    const token = decodeURIComponent(m[1]);
    storage.setItem(TOKEN_KEY, token);
    history.replaceState(null, '', loc.pathname + loc.search + '#/queue');
    return token;
  }
  return storage.getItem(TOKEN_KEY);
}

/** Drops a stored token the server refused. */
export function forgetToken(storage: Storage = window.sessionStorage): void {
  storage.removeItem(TOKEN_KEY);
}

/** The transport for where the UI runs. */
export async function connect(): Promise<Api | null> {
  const w = window as unknown as { __TAURI_INTERNALS__?: unknown };
  if (w.__TAURI_INTERNALS__) {
    const core = await import('@tauri-apps/api/core');
    const event = await import('@tauri-apps/api/event');
    return new Api(
      new TauriTransport(
        (cmd, args) => core.invoke(cmd, args),
        (name, cb) => event.listen(name, cb),
      ),
    );
  }
  const token = takeToken(window.location, window.sessionStorage, window.history);
  return token ? new Api(new HttpTransport(token)) : null;
}
