// Shared pieces of the browser tests: a real `countersign serve`, an A2A
// client made of plain JSON-RPC calls, and Chromium driven by playwright-core
// with every CSP violation and alert() recorded.
import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtempSync, readFileSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

const here = dirname(fileURLToPath(import.meta.url));
export const repo = resolve(here, '..', '..');
export const output = join(here, 'output');
mkdirSync(output, { recursive: true });

// playwright-core is a dev dependency of the UI package.
const require = createRequire(join(repo, 'ui', 'package.json'));
const { chromium } = require('playwright-core');

export const bin =
  process.env.COUNTERSIGN_BIN ?? join(process.env.CARGO_TARGET_DIR ?? join(repo, 'target'), 'debug', 'countersign');

/**
 * Starts `countersign serve` on 127.0.0.1:0 with a fresh data dir. With
 * `fileLimitKib`, the server may write files of at most that size (a write
 * past it fails as on a full disk); `liftFileLimit()` gives it room again.
 */
export async function startServer({
  config = join(here, 'countersign.toml'),
  dataDir,
  bind = '127.0.0.1:0',
  removeOnStop = !dataDir,
  fileLimitKib,
} = {}) {
  const dir = dataDir ?? mkdtempSync(join(tmpdir(), 'countersign-ui-'));
  const args = ['serve', '--config', config, '--data-dir', dir, '--bind', bind];
  const [cmd, argv] = fileLimitKib
    ? ['bash', ['-c', 'trap "" XFSZ; ulimit -S -f "$1"; shift; exec "$@"', 'bash', String(fileLimitKib), bin, ...args]]
    : [bin, args];
  const child = spawn(cmd, argv, {
    env: { ...process.env, COUNTERSIGN_UI_DIR: join(repo, 'ui', 'dist'), RUST_LOG: process.env.RUST_LOG ?? 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr += d;
    if (stderr.length > 200_000) stderr = stderr.slice(-100_000);
  });
  const lines = createInterface({ input: child.stdout });
  const it = lines[Symbol.asyncIterator]();
  const timeout = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const first = (await it.next()).value ?? '';
  const second = (await it.next()).value ?? '';
  clearTimeout(timeout);
  const base = first.match(/^listening on (http:\/\/\S+)$/)?.[1];
  const uiUrl = second.match(/^ui (\S+)$/)?.[1];
  if (!base || !uiUrl) throw new Error(`server did not start: ${first} ${second}\n${stderr}`);
  const token = new URL(uiUrl).hash.replace('#token=', '');
  return {
    base,
    uiUrl,
    token,
    dataDir: dir,
    child,
    log: () => stderr,
    liftFileLimit() {
      const r = spawnSync('prlimit', ['--pid', String(child.pid), '--fsize=unlimited:']);
      if (r.status !== 0) throw new Error(`prlimit failed: ${r.stderr}`);
    },
    async stop({ keepData = false } = {}) {
      if (child.exitCode === null) {
        const done = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await done;
      }
      // A data dir made here goes with its server, unless a restart test
      // keeps it for the next one.
      if (removeOnStop && !keepData) rmSync(dir, { recursive: true, force: true });
    },
  };
}

let rpcId = 0;

/** One A2A 1.0 JSON-RPC call; returns `result`, throws on an error. */
export async function rpc(base, agent, method, params) {
  const r = await fetch(`${base}/a2a/${agent}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'A2A-Version': '1.0' },
    body: JSON.stringify({ jsonrpc: '2.0', id: ++rpcId, method, params }),
  });
  const body = await r.json();
  if (body.error) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
  return body.result;
}

let msgId = 0;

/** Sends a message as an A2A client; returns the task. */
export async function send(base, agent, textOrParts, { messageId } = {}) {
  const parts = typeof textOrParts === 'string' ? [{ text: textOrParts }] : textOrParts;
  const result = await rpc(base, agent, 'SendMessage', {
    message: { messageId: messageId ?? `ui-test-${process.pid}-${++msgId}`, role: 'ROLE_USER', parts },
  });
  return result.task;
}

export async function getTask(base, agent, id) {
  return rpc(base, agent, 'GetTask', { id });
}

/** A UI API call with the token (for checks beside the browser). */
export async function api(server, path, init = {}) {
  const r = await fetch(server.base + path, {
    ...init,
    headers: { Authorization: `Bearer ${server.token}`, 'Content-Type': 'application/json', ...(init.headers ?? {}) },
  });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

/** Waits until `fn` returns something truthy (polling), or fails. */
export async function until(fn, what, ms = 15_000) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
}

export async function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    // playwright-core gives every launch its own fresh, temporary profile
    // (it refuses a --user-data-dir argument), removed when it closes.
  });
}

/**
 * A page that records CSP violations, alert/confirm/prompt calls, page
 * errors and failed UI requests; `problems()` lists them. `beforeLoad(page)`
 * runs before the page is opened (to route its requests).
 */
export async function openPage(browser, url, { width = 1280, height = 800, colorScheme = 'light', beforeLoad } = {}) {
  const context = await browser.newContext({ viewport: { width, height }, colorScheme, acceptDownloads: true });
  const page = await context.newPage();
  const errors = [];
  const expected = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('response', (r) => {
    if (r.status() >= 400) errors.push(`HTTP ${r.status()} ${r.request().method()} ${r.url()}`);
  });
  page.on('console', (m) => {
    // Images an agent links from other hosts cannot load here (no internet):
    // that is the network, not the page.
    if (m.type() === 'error' && !/net::ERR_(NAME_NOT_RESOLVED|INTERNET_DISCONNECTED|CONNECTION_REFUSED)/.test(m.text()))
      errors.push(`console: ${m.text()}`);
  });
  await page.addInitScript(() => {
    window.__alerts = [];
    window.__csp = [];
    for (const name of ['alert', 'confirm', 'prompt', 'print']) {
      window[name] = (...args) => {
        window.__alerts.push(`${name}(${args.join(',')})`);
      };
    }
    document.addEventListener('securitypolicyviolation', (e) => {
      window.__csp.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`);
    });
  });
  // Routes a test needs in place from the first request.
  await beforeLoad?.(page);
  await page.goto(url);
  return {
    page,
    context,
    /** Errors a test provokes on purpose (`HTTP 400 POST …`), and the console line that follows each. */
    expectError(pattern) {
      expected.push(pattern);
    },
    async problems() {
      const inPage = await page.evaluate(() => ({ alerts: window.__alerts, csp: window.__csp }));
      const unexpected = [];
      let skipConsole = 0;
      for (const e of errors) {
        if (expected.some((p) => p.test(e))) skipConsole++;
        else if (skipConsole && /^console: Failed to load resource: the server responded with a status of 4/.test(e)) skipConsole--;
        else unexpected.push(e);
      }
      return { alerts: inPage.alerts, csp: inPage.csp, errors: unexpected };
    },
    async close() {
      await context.close();
    },
  };
}

/** The vectors of the renderer's XSS corpus (tests/render_xss.rs), as written there. */
export function xssCorpus() {
  const src = readFileSync(join(repo, 'tests', 'render_xss.rs'), 'utf8');
  const out = [];
  const re = /^\s*v\(\w+,\s*"((?:[^"\\]|\\.)*)"/gm;
  for (const m of src.matchAll(re)) {
    out.push(
      m[1].replace(/\\(u\{([0-9a-fA-F]+)\}|x([0-9a-fA-F]{2})|.)/g, (_all, esc, uni, hex) => {
        if (uni) return String.fromCodePoint(parseInt(uni, 16));
        if (hex) return String.fromCharCode(parseInt(hex, 16));
        return { n: '\n', t: '\t', r: '\r', 0: '\0', '"': '"', "'": "'", '\\': '\\' }[esc] ?? esc;
      }),
    );
  }
  return out;
}
