// The approval UI end to end: Chromium (playwright-core) against a real
// `countersign serve`, with A2A clients that are plain JSON-RPC calls.
// Run by tests/ui/run.sh (`node --test`).
import { after, before, afterEach, describe, test as nodeTest } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { api, getTask, launch, openPage, output, send, startServer, until, xssCorpus } from './harness.mjs';

let server;
let browser;
let ui;
/** Numbers measured along the way, written to output/measurements.json. */
const measured = {};

before(async () => {
  server = await startServer();
  browser = await launch();
});

after(async () => {
  await ui?.close();
  await browser?.close();
  await server?.stop();
  writeFileSync(join(output, 'measurements.json'), JSON.stringify(measured, null, 2) + '\n');
});

// Normal use never trips the CSP, never runs an alert and never throws.
afterEach(async () => {
  if (!ui) return;
  const p = await ui.problems();
  assert.deepEqual(p.csp, [], 'CSP violations');
  assert.deepEqual(p.alerts, [], 'alert() ran');
  assert.deepEqual(p.errors, [], 'page errors');
});

/**
 * A test that, when it fails, leaves what the page showed: a screenshot in
 * output/ and the screen's text in the test's log, to tell a slow page from
 * a wrong one.
 */
function test(name, fn) {
  return nodeTest(name, async (t) => {
    try {
      await fn(t);
    } catch (e) {
      const page = ui?.page;
      if (page && !page.isClosed()) {
        const slug = name.replace(/[^a-z0-9]+/gi, '-').slice(0, 60);
        await page.screenshot({ path: join(output, `failed-${slug}.png`) }).catch(() => {});
        const text = await page
          .evaluate(() => `${location.hash}\n${document.querySelector('.layout')?.innerText ?? document.body.innerText}`)
          .catch((err) => `(page not readable: ${err.message})`);
        t.diagnostic(`page at failure: ${text.slice(0, 2000).replace(/\n+/g, ' | ')}`);
      }
      throw e;
    }
  });
}

async function fresh(opts) {
  await ui?.close();
  ui = await openPage(browser, server.uiUrl, opts);
  await ui.page.locator('.layout').waitFor();
  return ui.page;
}

const row = (page, taskId) => page.locator(`.qrow[data-task-id="${taskId}"]`);

/** Restarts `local` on its data dir (retention runs as it starts) and waits
 *  until task `id` has left its database; returns the restarted server. */
async function restartUntilArchived(local, config, id, what) {
  await local.stop({ keepData: true });
  const restarted = await startServer({ config, dataDir: local.dataDir, removeOnStop: true });
  await until(async () => (await api(restarted, `/api/tasks/${id}`)).status === 404, what);
  return restarted;
}

/** A fresh page on server `s`'s UI, showing task `id`. */
async function openTask(s, id) {
  await ui?.close();
  ui = await openPage(browser, s.uiUrl);
  await ui.page.evaluate((t) => (location.hash = `#/task/${encodeURIComponent(t)}`), id);
  return ui.page;
}

/**
 * Holds back the page's requests to `url` until the returned function is
 * called (a late answer, a late stream).
 */
async function holdBack(page, url) {
  let release;
  const held = new Promise((r) => (release = r));
  await page.route(url, async (route) => {
    await held;
    await route.continue();
  });
  return release;
}

/**
 * Searches the queue by keyboard (/, the words, Enter) and waits for the
 * search's own rows, `n` of them all starting with `prefix`: the list before
 * the search lands can hold as many rows (older parked tasks, and the new
 * ones its refresh has brought in so far), and a cursor put on one of them
 * rightly follows that task to its place in the new list.
 */
async function searchByKeyboard(page, words, prefix, n) {
  await page.keyboard.press('/');
  await page.keyboard.type(words);
  await page.keyboard.press('Enter');
  await until(async () => {
    const previews = await page.locator('.qrow .preview').allInnerTexts();
    return previews.length === n && previews.every((p) => p.startsWith(prefix));
  }, `the ${n} searched rows`);
}

async function focusList(page) {
  await page.locator('.vlist').focus();
}

/** Opens a task by keyboard from the queue: focus its row, Enter; returns ms to its content. */
async function openByKeyboard(page, taskId) {
  await page.locator('#f-sort').selectOption('oldest');
  await row(page, taskId).waitFor();
  await row(page, taskId).locator('.agent').click();
  await focusList(page);
  const t0 = Date.now();
  await page.keyboard.press('Enter');
  await page.locator('.decision-bar').waitFor();
  return Date.now() - t0;
}

describe('the approval UI', () => {
  test('the token moves from the address bar to session storage; the empty queue shows a first-task command with the real URL', async () => {
    const page = await fresh();
    assert.ok(!page.url().includes('token='), page.url());
    const empty = page.getByTestId('empty-queue');
    await empty.waitFor();
    const snippet = await empty.locator('pre').innerText();
    assert.ok(snippet.includes(`curl -s ${server.base}/a2a/inbox`), snippet);
    assert.ok(snippet.includes('"method":"SendMessage"'), snippet);
    // The command works as printed.
    const cmd = JSON.parse(snippet.match(/-d '(.*)'$/s)[1]);
    assert.equal(cmd.method, 'SendMessage');
    // A reload keeps working without the fragment.
    await page.reload();
    await page.getByTestId('empty-queue').waitFor();
  });

  test('a wrong token gets a page saying so, not empty screens', async () => {
    await ui?.close();
    ui = await openPage(browser, `${server.base}/#token=not-the-token`);
    ui.expectError(/^HTTP 401 GET .*\/api\/health$/);
    await ui.page.getByRole('heading', { name: 'Countersign needs its UI token' }).waitFor();
    assert.equal(await ui.page.evaluate(() => sessionStorage.getItem('countersign.token')), null);
  });

  test('a task sent by an A2A client appears live, with its counts', async () => {
    const page = await fresh();
    await page.getByTestId('empty-queue').waitFor();
    const task = await send(server.base, 'inbox', 'May I deploy v2 to production?\nChangelog attached.');
    assert.equal(task.status.state, 'TASK_STATE_INPUT_REQUIRED');
    const r = row(page, task.id);
    await r.waitFor();
    assert.match(await r.innerText(), /input[\s\S]*Inbox[\s\S]*May I deploy v2 to production\?/);
    // The agent by its name; its id on hover.
    assert.equal(await r.locator('.agent').innerText(), 'Inbox');
    assert.equal(await r.locator('.agent').getAttribute('title'), 'inbox');
    assert.ok(!(await r.innerText()).includes('Changelog'), 'only the first line');
    await until(async () => (await page.getByTestId('count-all').innerText()) === '1', 'the sidebar count');
    assert.match(await page.getByTestId('count-agent-inbox').innerText(), /^Inbox\s+1$/);
  });

  test('a task parked while the event stream is still opening shows up', async () => {
    // Hold the stream back until the queue has been read and a task parked:
    // no event will tell of that task, so the UI must read again once the
    // stream is open.
    let open;
    const page = await fresh({ beforeLoad: async (p) => (open = await holdBack(p, /\/api\/events$/)) });
    const before = (await api(server, '/api/queue?limit=1')).body.total;
    await until(async () => (await page.getByTestId('queue-total').innerText()) === `${before} parked`, 'the first read');
    const task = await send(server.base, 'inbox', 'Parked before the stream opened?');
    open();
    await row(page, task.id).waitFor({ timeout: 5000 });
    await until(async () => (await page.getByTestId('count-all').innerText()) === `${before + 1}`, 'the sidebar count');
  });

  test('a browser notification names the agent and tells what a newly parked task asks; a click on it opens the task', async () => {
    // The browser's notifications, allowed and recorded: headless Chromium
    // shows none.
    const page = await fresh({
      beforeLoad: (p) =>
        p.addInitScript(() => {
          window.__notes = [];
          window.Notification = class {
            static permission = 'granted';
            onclick = null;
            constructor(title, opts) {
              Object.assign(this, { title, ...opts });
              window.__notes.push(this);
            }
          };
        }),
    });
    await page.locator('.vlist, [data-testid=empty-queue]').first().waitFor();
    const task = await send(server.base, 'inbox', 'Rotate the staging keys?');
    await until(() => page.evaluate(() => window.__notes.length === 1), 'one notification');
    const note = await page.evaluate(() => ({ ...window.__notes[0] }));
    // The agent's name as title, what the task asks as body (as the
    // desktop app's).
    assert.equal(note.title, 'Inbox');
    assert.equal(note.body, 'Rotate the staging keys?');
    assert.equal(note.tag, task.id);
    assert.equal(note.silent, true);
    await page.evaluate(() => window.__notes[0].onclick());
    await page.locator('.decision-bar').waitFor();
    assert.ok(page.url().endsWith(`#/task/${encodeURIComponent(task.id)}`), page.url());
    assert.match(await page.locator('main').innerText(), /Rotate the staging keys\?/);
  });

  test('approve with a comment, by keyboard; the client sees it', async () => {
    const page = await fresh();
    const task = await send(server.base, 'inbox', 'Approve the invoice 1042?');
    measured.openTaskMs = await openByKeyboard(page, task.id);
    // The task names its agent, with the id beside the name.
    await until(async () => (await page.getByTestId('task-agent').innerText()) === 'agent Inbox inbox', "the agent's name");
    await page.keyboard.press('a');
    await page.locator('#d-comment').fill('Paid from the Q3 budget');
    await page.keyboard.press('Enter');
    const done = await until(async () => {
      const t = await getTask(server.base, 'inbox', task.id);
      return t.status.state === 'TASK_STATE_COMPLETED' && t;
    }, 'the task to complete');
    const decision = done.artifacts.find((a) => a.name === 'decision');
    assert.deepEqual(decision.parts[0].data, { decision: 'approve', comment: 'Paid from the Q3 budget' });
    await row(page, task.id).waitFor({ state: 'detached' });
  });

  test('reply with text, JSON data and a file; the client sees all three', async () => {
    const page = await fresh();
    const task = await send(server.base, 'inbox', 'Which plan should I use?');
    await openByKeyboard(page, task.id);
    await page.keyboard.press('r');
    await page.locator('#d-reply').fill('Plan B, with the attached limits');
    await page.getByLabel('Attach JSON data').check();
    await page.locator('#d-data').fill('{"plan": "B", "maxCost": 300}');
    await page.getByTestId('reply-files').setInputFiles({
      name: 'limits.csv',
      mimeType: 'text/csv',
      buffer: Buffer.from('item,max\ncompute,200\n'),
    });
    await page.locator('#d-reply').focus();
    await page.keyboard.press('Control+Enter');
    const done = await until(async () => {
      const t = await getTask(server.base, 'inbox', task.id);
      return t.status.state === 'TASK_STATE_COMPLETED' && t;
    }, 'the reply to complete the task');
    const parts = done.status.message.parts;
    assert.ok(parts.some((p) => p.text === 'Plan B, with the attached limits'), JSON.stringify(parts));
    assert.ok(parts.some((p) => p.data?.plan === 'B' && p.data?.maxCost === 300), JSON.stringify(parts));
    const file = parts.find((p) => p.filename === 'limits.csv');
    assert.ok(file, JSON.stringify(parts));
    assert.equal(Buffer.from(file.raw, 'base64').toString(), 'item,max\ncompute,200\n');
  });

  test('invalid JSON data is refused in the form, before anything is sent', async () => {
    const page = await fresh();
    const task = await send(server.base, 'inbox', 'Send the data?');
    await openByKeyboard(page, task.id);
    await page.keyboard.press('r');
    await page.getByLabel('Attach JSON data').check();
    await page.locator('#d-data').fill('{not json');
    await page.getByRole('button', { name: /Send reply/ }).click();
    await page.getByText('The data is not JSON').waitFor();
    assert.equal((await getTask(server.base, 'inbox', task.id)).status.state, 'TASK_STATE_INPUT_REQUIRED');
  });

  test('reject with a reason; the client sees a rejected task', async () => {
    const page = await fresh();
    const task = await send(server.base, 'inbox', 'Delete the staging database?');
    await openByKeyboard(page, task.id);
    await page.keyboard.press('x');
    await page.locator('#d-reason').fill('Not before the audit');
    await page.keyboard.press('Enter');
    const done = await until(async () => {
      const t = await getTask(server.base, 'inbox', task.id);
      return t.status.state === 'TASK_STATE_REJECTED' && t;
    }, 'the task to be rejected');
    assert.match(JSON.stringify(done.status.message), /Not before the audit/);
  });

  test('bulk approve: select all, approve, a result per task; every client sees its approval', async () => {
    const page = await fresh();
    const tasks = [];
    for (const n of [1, 2, 3]) tasks.push(await send(server.base, 'ops', `Restart worker ${n}?`));
    await page.locator('#f-agent').selectOption('ops');
    // Wait for the filter's rows, not just for these three: the list before
    // it lands shows them too (events bring them in), beside older tasks
    // of other agents, and select-all selects what is shown.
    await until(async () => {
      const agents = await page.locator('.qrow .agent').allInnerTexts();
      return agents.length === 3 && agents.every((a) => a === 'Ops');
    }, "the filter's three rows");
    for (const t of tasks) await row(page, t.id).waitFor();
    await focusList(page);
    await page.keyboard.press('Shift+A');
    assert.equal(await page.getByTestId('selected-count').innerText(), '3 selected');
    await page.keyboard.press('a');
    await page.locator('#quick-text').fill('rolling restart ok');
    await page.keyboard.press('Enter');
    const results = page.getByTestId('bulk-results');
    await until(async () => /Done: 3 of 3 approved/.test(await results.innerText()), 'the bulk results');
    assert.equal(await results.locator('li.result-ok').count(), 3);
    for (const t of tasks) {
      const done = await getTask(server.base, 'ops', t.id);
      assert.equal(done.status.state, 'TASK_STATE_COMPLETED');
      assert.equal(done.artifacts.find((a) => a.name === 'decision').parts[0].data.comment, 'rolling restart ok');
    }
  });

  test('keyboard-only triage of five tasks', async () => {
    const page = await fresh();
    const texts = ['Ship release 7?', 'Rotate the API keys?', 'Email the customer?', 'Scale to 10 pods?', 'Merge PR 88?'];
    const ids = {};
    for (const t of texts) ids[`Triage: ${t}`] = (await send(server.base, 'ops', `Triage: ${t}`)).id;
    // Search for them, by keyboard only: / types into the search, Enter goes back to the list.
    await searchByKeyboard(page, 'Triage', 'Triage: ', 5);
    const heading = () => page.locator('#task-title').innerText();
    const decided = {};
    await page.keyboard.press('j');
    // Enter ran the search: the run the typing had queued must not come
    // 200 ms later and put the cursor back on the first row.
    await page.waitForTimeout(400);
    assert.equal(await page.locator('.qrow').nth(1).evaluate((e) => e.classList.contains('focused')), true);
    await page.keyboard.press('k');
    await page.keyboard.press('Enter'); // 1: approve in the task
    await page.locator('.decision-bar .actions').waitFor();
    let title = await heading();
    await page.keyboard.press('a');
    await page.keyboard.press('Enter');
    decided[title] = 'TASK_STATE_COMPLETED';
    // After a decision the next parked task opens. 2: reply.
    title = await until(async () => (await heading()) !== title && (await page.locator('.decision-bar .actions').count()) && heading(), 'the next task');
    await page.keyboard.press('r');
    await page.keyboard.type('Do it after the freeze');
    await page.keyboard.press('Control+Enter');
    decided[title] = 'TASK_STATE_COMPLETED';
    title = await until(async () => (await heading()) !== title && (await page.locator('.decision-bar .actions').count()) && heading(), 'the next task');
    await page.keyboard.press('x'); // 3: reject with a reason
    await page.keyboard.type('Legal has not seen it');
    await page.keyboard.press('Enter');
    decided[title] = 'TASK_STATE_REJECTED';
    const replied = Object.keys(decided)[1];
    title = await until(async () => (await heading()) !== title && (await page.locator('.decision-bar .actions').count()) && heading(), 'the next task');
    await page.keyboard.press('Escape'); // back to the queue, on the task that was open
    await until(async () => (await page.locator('.qrow').count()) === 2, 'two left');
    assert.equal(await page.locator('.qrow.focused .preview').innerText(), title);
    await page.keyboard.press('a'); // 4: approve from the queue
    await page.locator('#quick-text').waitFor();
    await page.keyboard.press('Enter');
    decided[title] = 'TASK_STATE_COMPLETED';
    await until(async () => (await page.locator('.qrow').count()) === 1, 'one left');
    title = await page.locator('.qrow.focused .preview').innerText();
    await page.keyboard.press('x'); // 5: reject from the queue
    await page.locator('#quick-text').waitFor();
    // Should the focus leave the panel's field, Enter still confirms.
    await focusList(page);
    await page.keyboard.press('Enter');
    decided[title] = 'TASK_STATE_REJECTED';
    await page.getByText('Nothing parked matches').waitFor();
    assert.equal(Object.keys(decided).length, 5);
    for (const [t, state] of Object.entries(decided)) {
      assert.equal((await getTask(server.base, 'ops', ids[t])).status.state, state, t);
    }
    const reply = await getTask(server.base, 'ops', ids[replied]);
    assert.equal(reply.status.message.parts[0].text, 'Do it after the freeze');
  });

  test('a reason typed while an earlier quick decision is still being sent stays in its field', async () => {
    const page = await fresh();
    const first = await send(server.base, 'ops', 'Focus: first?');
    const second = await send(server.base, 'ops', 'Focus: second?');
    await searchByKeyboard(page, 'Focus', 'Focus: ', 2);
    // Enter on the panel's Cancel button cancels: a focused button keeps its Enter.
    await row(page, first.id).locator('.agent').click();
    await page.keyboard.press('x');
    await page.locator('#quick-text').waitFor();
    await page.locator('form.quick').getByRole('button', { name: /Cancel/ }).focus();
    await page.keyboard.press('Enter');
    await page.locator('#quick-text').waitFor({ state: 'detached' });
    assert.equal(await row(page, first.id).count(), 1);
    // The first decision's answer is held back until the second panel is in use.
    const release = await holdBack(page, `**/api/tasks/${first.id}/decision`);
    await row(page, first.id).locator('.agent').click();
    await focusList(page);
    await page.keyboard.press('a');
    await page.locator('#quick-text').waitFor();
    await page.keyboard.press('Enter');
    await page.getByText('Deciding…').waitFor();
    await row(page, second.id).locator('.agent').click();
    await page.keyboard.press('x');
    await page.locator('#quick-text').waitFor();
    await page.keyboard.type('Half');
    release();
    await page.getByText('Done: 1 of 1 approved').waitFor();
    await page.keyboard.type(' and the rest');
    assert.equal(await page.locator('#quick-text').inputValue(), 'Half and the rest');
    await page.keyboard.press('Enter');
    await page.getByText('Nothing parked matches').waitFor();
    assert.equal((await getTask(server.base, 'ops', first.id)).status.state, 'TASK_STATE_COMPLETED');
    const rejected = await getTask(server.base, 'ops', second.id);
    assert.equal(rejected.status.state, 'TASK_STATE_REJECTED');
    assert.match(JSON.stringify(rejected.status.message), /Half and the rest/);
  });

  test('a person who leaves a task while its decision is being sent stays where they went', async () => {
    const page = await fresh();
    const task = await send(server.base, 'inbox', 'Archive the old logs?');
    const other = await send(server.base, 'inbox', 'Archive the new logs?');
    const release = await holdBack(page, `**/api/tasks/${task.id}/decision`);
    await openByKeyboard(page, task.id);
    await page.keyboard.press('a');
    await page.locator('#d-comment').waitFor();
    await page.keyboard.press('Enter');
    // Back to the queue while the answer is held back.
    await page.keyboard.press('Escape');
    await page.keyboard.press('Escape');
    await page.locator('#queue-title').waitFor();
    release();
    await until(async () => (await getTask(server.base, 'inbox', task.id)).status.state === 'TASK_STATE_COMPLETED', 'the approval');
    await until(async () => !(await row(page, task.id).count()), 'its row to go');
    // Not taken to the next task by the late answer.
    await page.waitForTimeout(300);
    assert.equal(await page.evaluate(() => location.hash), '#/queue');
    assert.equal(await row(page, other.id).count(), 1);
  });

  test('a decision made elsewhere (the CLI, another window) updates the open task and the queue', async () => {
    const page = await fresh();
    const task = await send(server.base, 'inbox', 'Renew the TLS certificate?');
    await openByKeyboard(page, task.id);
    const r = await api(server, `/api/tasks/${task.id}/decision`, {
      method: 'POST',
      headers: { 'X-Countersign-Actor': 'cli' },
      body: JSON.stringify({ kind: 'approve', text: 'done by hand' }),
    });
    assert.equal(r.status, 200);
    await until(async () => /Decided: approve from the CLI, .* — (being )?delivered to the agent\./.test(await page.getByTestId('decided').innerText()), 'the decided line');
    await page.keyboard.press('Escape');
    await page.locator('.vlist, [data-testid=empty-queue]').first().waitFor();
    assert.equal(await row(page, task.id).count(), 0);
  });

  test('a window that missed a decision made elsewhere is told "already decided", and nothing is decided twice', async () => {
    await ui?.close();
    ui = null;
    const task = await send(server.base, 'inbox', 'Pay the contractor?');
    // A window whose event stream is cut: it cannot hear of the other decision.
    const lagging = await openPage(browser, server.uiUrl);
    ui = lagging;
    const page = lagging.page;
    await page.route('**/api/events', (route) => route.abort());
    await page.reload();
    await openByKeyboard(page, task.id);
    await page.keyboard.press('a');
    await page.locator('#d-comment').fill('looks fine');
    const r = await api(server, `/api/tasks/${task.id}/decision`, {
      method: 'POST',
      headers: { 'X-Countersign-Actor': 'cli' },
      body: JSON.stringify({ kind: 'reject', text: 'over budget' }),
    });
    assert.equal(r.status, 200);
    await page.keyboard.press('Enter');
    const already = page.getByTestId('already-decided');
    await already.waitFor();
    assert.match(await already.innerText(), /Already decided: reject from the CLI at /);
    const detail = await api(server, `/api/tasks/${task.id}`);
    assert.equal(detail.body.decisions.length, 1);
    assert.equal((await getTask(server.base, 'inbox', task.id)).status.state, 'TASK_STATE_REJECTED');
    // The cut stream shows up as console errors of the aborted requests: expected here.
    await lagging.close();
    ui = null;
  });

  test('an auth-required task: the sign-in link is found and Continue moves the task on', async () => {
    const page = await fresh();
    const task = await send(server.base, 'demo', 'Deploy it', { messageId: `auth-${Date.now()}` });
    assert.equal(task.status.state, 'TASK_STATE_AUTH_REQUIRED');
    await openByKeyboard(page, task.id);
    const link = page.getByRole('button', { name: /Open sign-in link/ });
    assert.equal(await link.isEnabled(), true);
    const popup = page.waitForEvent('popup');
    await page.keyboard.press('o');
    const opened = await popup;
    assert.match(opened.url(), /^https:\/\/login\.example\.com\/authorize\?client=countersign|^about:blank|^chrome-error/);
    await opened.close();
    await page.keyboard.press('c');
    await until(async () => (await getTask(server.base, 'demo', task.id)).status.state !== 'TASK_STATE_AUTH_REQUIRED', 'the task to move on');
  });

  test('artifacts: markdown with a highlighted code block and a table, a JSON tree, an inline image, a downloadable file', async () => {
    const page = await fresh();
    const task = await send(server.base, 'demo', 'Write the deployment report', { messageId: `rich-${Date.now()}` });
    assert.equal(task.status.state, 'TASK_STATE_INPUT_REQUIRED');
    await openByKeyboard(page, task.id);
    const report = page.locator('.artifact', { hasText: 'report.md' });
    await report.locator('table').waitFor();
    assert.equal(await report.locator('h1').innerText(), 'Deployment report');
    assert.ok((await report.locator('code .tok-keyword').allInnerTexts()).includes('def'));
    assert.ok((await report.locator('code .tok-comment').allInnerTexts()).includes('# ramp slowly'));
    const metrics = page.locator('.artifact', { hasText: 'metrics' });
    await metrics.getByText('"eu-west"').waitFor();
    assert.match(await metrics.innerText(), /errors: 0\.002/);
    const img = page.locator('.artifact img[alt="latency.png"]');
    await img.waitFor();
    await until(() => img.evaluate((el) => el.complete && el.naturalWidth === 96), 'the image to load');
    assert.match(await img.getAttribute('src'), /^blob:/);
    const logs = page.locator('.artifact', { hasText: 'deploy.log' });
    assert.match(await logs.innerText(), /deploy\.log[\s\S]*text\/plain · 47 B/);
    // A small text file reads in place, as text.
    await logs.getByTestId('file-text').waitFor();
    assert.equal(await logs.getByTestId('file-text').textContent(), '2026-01-01 deploy started\n2026-01-01 deploy ok\n');
    assert.equal(await page.locator('.artifact', { hasText: 'latency chart' }).getByTestId('file-text').count(), 0);
    const download = page.waitForEvent('download');
    await logs.getByRole('button', { name: 'Download' }).click();
    const file = await download;
    assert.equal(file.suggestedFilename(), 'deploy.log');
    assert.equal(readFileSync(await file.path(), 'utf8'), '2026-01-01 deploy started\n2026-01-01 deploy ok\n');
    // The task screen scrolls inside the page: one shot at the top, one at the end.
    await page.evaluate(() => document.querySelector('.screen.task').scrollTo(0, 0));
    await page.screenshot({ path: join(output, 'task-artifacts.png') });
    await page.evaluate(() => document.querySelector('.screen.task').scrollTo(0, 1e6));
    await page.screenshot({ path: join(output, 'task-artifacts-end.png') });
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.evaluate(() => document.querySelector('.screen.task').scrollTo(0, 0));
    await page.screenshot({ path: join(output, 'task-artifacts-dark.png') });
  });

  test('a caller\'s markdown reads as a document: its heading as the title, bullets, a marked quote; a narrow window stacks the timeline under it', async () => {
    const page = await fresh({ width: 820, height: 800 });
    const task = await send(server.base, 'inbox', '# Rollout plan\n\n- drain eu-west\n- migrate\n\n> Risky on Fridays.');
    await openByKeyboard(page, task.id);
    assert.equal(await page.locator('#task-title').innerText(), 'Rollout plan');
    const content = page.locator('.messages .content').first();
    assert.equal(await content.locator('ul').evaluate((el) => getComputedStyle(el).listStyleType), 'disc');
    const quote = content.locator('blockquote');
    assert.equal(await quote.evaluate((el) => getComputedStyle(el).borderLeftStyle), 'solid');
    assert.equal(await quote.locator('p').evaluate((el) => getComputedStyle(el).marginTop), '0px');
    const [conversation, timeline] = await Promise.all(
      ['#conv-title', '.timeline'].map((sel) => page.locator(sel).first().boundingBox()),
    );
    assert.ok(timeline.y > conversation.y + 50, `the timeline under the conversation: ${JSON.stringify({ conversation, timeline })}`);
    const r = await api(server, `/api/tasks/${task.id}/decision`, {
      method: 'POST',
      body: JSON.stringify({ kind: 'approve' }),
    });
    assert.equal(r.status, 200);
  });

  test('the XSS corpus, from caller and agent, renders with no script run and no CSP violation', async () => {
    const corpus = xssCorpus();
    assert.ok(corpus.length >= 100, `${corpus.length} vectors`);
    const ids = [];
    // As the caller's markdown, as text/plain and text/html parts, as data
    // and as file names, to a person (parked)...
    const parts = corpus.map((text) => ({ text }));
    ids.push((await send(server.base, 'inbox', parts)).id);
    ids.push(
      (await send(server.base, 'inbox', corpus.map((text, i) => ({ text, mediaType: i % 2 ? 'text/html' : 'text/plain' })))).id,
    );
    ids.push(
      (
        await send(server.base, 'inbox', [
          { data: { vectors: corpus } },
          ...corpus.slice(0, 60).map((v, i) => ({ raw: Buffer.from('x').toString('base64'), filename: v, mediaType: i % 2 ? 'application/pdf' : 'text/html' })),
        ])
      ).id,
    );
    // ...and echoed back by an agent (agent message and status).
    const echoed = await send(server.base, 'demo', corpus.slice(0, 60).map((text) => ({ text })), { messageId: `xss-${Date.now()}` });
    ids.push(echoed.id);
    const page = await fresh();
    for (const id of ids) {
      await page.evaluate((id) => (location.hash = `#/task/${encodeURIComponent(id)}`), id);
      await page.locator('.conversation .msg').first().waitFor();
      await page.waitForTimeout(300);
      const bad = await page.evaluate(() => {
        const out = [];
        for (const el of document.querySelectorAll('.content *, .data-part *, .file *')) {
          for (const a of el.attributes) {
            if (/^on/i.test(a.name)) out.push(`${el.tagName} ${a.name}`);
            if (/^(href|src|action|formaction|xlink:href)$/i.test(a.name) && /^\s*(javascript|vbscript|data):/i.test(a.value))
              out.push(`${el.tagName} ${a.name}=${a.value}`);
          }
          if (/^(SCRIPT|IFRAME|OBJECT|EMBED|STYLE|FORM|SVG|MATH|BASE|META|LINK)$/i.test(el.tagName)) out.push(el.tagName);
        }
        return out;
      });
      assert.deepEqual(bad, [], `active content in task ${id}`);
      const p = await ui.problems();
      assert.deepEqual(p.alerts, [], `alert ran in task ${id}`);
      assert.deepEqual(p.csp, [], `CSP violation in task ${id}`);
    }
    // The text of the attacks stays visible as text.
    await page.evaluate((id) => (location.hash = `#/task/${encodeURIComponent(id)}`), ids[0]);
    await page.getByText('<script>alert(1)</script>').first().waitFor();
  });

  test('history lists the decisions and exports them as JSON Lines and CSV', async () => {
    const page = await fresh();
    await page.keyboard.press('g');
    await page.keyboard.press('h');
    await page.getByRole('heading', { name: 'History' }).waitFor();
    await until(async () => (await page.getByTestId('history-row').count()) >= 10, 'history rows');
    assert.match(await page.locator('table.grid').innerText(), /reject[\s\S]*Not before the audit/);
    await page.screenshot({ path: join(output, 'history.png') });
    const jsonl = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Export JSON Lines' }).click();
    const j = await jsonl;
    assert.equal(j.suggestedFilename(), 'countersign-history.jsonl');
    const lines = readFileSync(await j.path(), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    assert.ok(lines.length >= 10);
    assert.ok(lines.some((l) => JSON.stringify(l).includes('Paid from the Q3 budget')));
    const csvDl = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Export CSV' }).click();
    const c = await csvDl;
    assert.equal(c.suggestedFilename(), 'countersign-history.csv');
    const csv = readFileSync(await c.path(), 'utf8');
    assert.ok(csv.split('\n').length > 10);
    assert.match(csv, /Not before the audit/);
    // Filters narrow the list.
    await page.locator('#h-search').fill('invoice');
    await until(async () => (await page.getByTestId('history-row').count()) === 1, 'one matching row');
    // A decision made elsewhere joins the open list, no reload needed.
    await page.locator('#h-search').fill('');
    await until(async () => (await page.getByTestId('history-row').count()) >= 10, 'every row again');
    // Escape clears a search at once, as on the queue and the Tasks screen.
    await page.locator('#h-search').fill('invoice');
    await until(async () => (await page.getByTestId('history-row').count()) === 1, 'one matching row again');
    await page.locator('#h-search').press('Escape');
    assert.equal(await page.locator('#h-search').inputValue(), '');
    await until(async () => (await page.getByTestId('history-row').count()) >= 10, 'every row after Escape');
    // A search past the server's bounds says why, and clearing it brings the rows back.
    ui.expectError(/^HTTP 400 GET .*\/api\/history\?q=w0\+w1\+/);
    await page.locator('#h-search').fill(Array.from({ length: 33 }, (_, i) => `w${i}`).join(' '));
    await page.getByRole('alert').filter({ hasText: 'a search takes at most 32 words and 1,000 characters' }).waitFor();
    assert.equal(await page.locator('#h-search').getAttribute('maxlength'), '1000');
    await page.locator('#h-search').press('Escape');
    await until(async () => (await page.getByTestId('history-row').count()) >= 10, 'every row after the refused search');
    assert.equal(await page.getByRole('alert').filter({ hasText: 'at most 32 words' }).count(), 0);
    const task = await send(server.base, 'inbox', 'Archive the old logs?');
    const r = await api(server, `/api/tasks/${task.id}/decision`, {
      method: 'POST',
      headers: { 'X-Countersign-Actor': 'cli' },
      body: JSON.stringify({ kind: 'approve', text: 'archived by hand' }),
    });
    assert.equal(r.status, 200);
    // ...under its agent's name.
    await until(async () => /archived by hand\tInbox\b/.test(await page.getByTestId('history-row').first().innerText()), 'the new decision, live');
  });

  test('tasks: every task, newest change first, live; parked ones marked; narrowed by agent, state and words; opened by keyboard', async () => {
    const page = await fresh();
    await page.keyboard.press('g');
    await page.keyboard.press('t');
    await page.getByRole('heading', { name: 'Tasks' }).waitFor();
    await send(server.base, 'inbox', 'Renew the certificate?');
    // A new task joins the top, live, marked as waiting for a decision.
    const task = await send(server.base, 'ops', 'Rotate the staging keys?');
    const rowOf = () => page.locator(`[data-testid="task-row"][data-task-id="${task.id}"]`);
    await until(async () => /waiting for you/.test((await rowOf().innerText().catch(() => '')) ?? ''), 'the new task, live');
    assert.equal(await page.getByTestId('task-row').first().getAttribute('data-task-id'), task.id);
    assert.match(await rowOf().innerText(), /input\s+waiting for you\s+Ops\s+Rotate the staging keys\?/);
    // Decided elsewhere: the row says how it ended, and no longer waits.
    const r = await api(server, `/api/tasks/${task.id}/decision`, { method: 'POST', body: JSON.stringify({ kind: 'approve' }) });
    assert.equal(r.status, 200);
    await until(async () => /completed/.test(await rowOf().innerText()), 'the task completed, live');
    assert.doesNotMatch(await rowOf().innerText(), /waiting for you/);
    await page.screenshot({ path: join(output, 'tasks.png') });
    // One agent's tasks only.
    await page.locator('#t-agent').selectOption('inbox');
    await until(async () => (await rowOf().count()) === 0, 'the ops task filtered out');
    const agents = await page.getByTestId('task-row').locator('td:nth-child(3)').allInnerTexts();
    assert.ok(agents.length > 0 && agents.every((a) => a === 'Inbox'), agents.join(', '));
    await page.locator('#t-agent').selectOption('ops');
    await rowOf().waitFor();
    // …in one state.
    await page.locator('#t-state').selectOption('failed');
    await until(async () => (await rowOf().count()) === 0, 'the completed task filtered out');
    await page.locator('#t-state').selectOption('completed');
    await rowOf().waitFor();
    await page.locator('#t-state').blur();
    // j / k move, Enter opens the focused task.
    await page.locator('#t-agent').blur();
    await page.keyboard.press('j');
    await page.keyboard.press('k');
    await page.keyboard.press('Enter');
    await until(async () => page.url().endsWith(`#/task/${encodeURIComponent(task.id)}`), 'the task to open');
    await page.getByText('Rotate the staging keys?').first().waitFor();
    // Back on the list, words narrow it too: each in a task's request
    // (its first line, without case) or in its id.
    await page.keyboard.press('g');
    await page.keyboard.press('t');
    await page.locator('#t-state').selectOption('');
    await page.locator('#t-agent').selectOption('');
    // The list without those filters first: the state filter left from
    // above hides the task below too, and would pass the wait for it to go
    // before the words were searched.
    await page.getByText('Renew the certificate?').first().waitFor();
    await page.locator('#t-agent').blur();
    await page.keyboard.press('/');
    await page.keyboard.type('STAGING rotate');
    await until(async () => (await page.getByText('Renew the certificate?').count()) === 0, 'the tasks without both words gone');
    await rowOf().waitFor();
    const requests = await page.getByTestId('task-row').locator('td:nth-child(4)').allInnerTexts();
    assert.ok(requests.length > 0 && requests.every((r) => /staging/i.test(r) && /rotate/i.test(r)), requests.join(' | '));
    await page.locator('#t-search').fill(task.id.slice(-12));
    await until(async () => (await page.getByTestId('task-row').count()) === 1 && (await rowOf().count()) === 1, 'the task by its id');
    await page.locator('#t-search').fill('no-task-holds-this');
    await page.getByText('No tasks match these filters.').waitFor();
    await page.locator('#t-search').fill('');
    await page.getByText('Renew the certificate?').first().waitFor();
    // The keys the queue's search box has: Enter searches at once and hands
    // the keys back to the screen, / selects the words, Escape clears them.
    await page.locator('#t-search').fill('no-task-holds-this');
    await page.keyboard.press('Enter');
    await page.getByText('No tasks match these filters.').waitFor();
    assert.notEqual(await page.evaluate(() => document.activeElement?.id), 't-search');
    await page.keyboard.press('/');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 't-search');
    const selected = await page.evaluate(() => {
      const box = document.activeElement;
      return box.value.slice(box.selectionStart, box.selectionEnd);
    });
    assert.equal(selected, 'no-task-holds-this');
    await page.keyboard.press('Escape');
    assert.equal(await page.locator('#t-search').inputValue(), '');
    await page.getByText('Renew the certificate?').first().waitFor();
  });

  test('agents & peers: endpoints with copy buttons, a peer previewed then added with its card, a subscription URL and token', async () => {
    const peerServer = await startServer();
    try {
      const page = await fresh();
      await page.keyboard.press('g');
      await page.keyboard.press('a');
      const inbox = page.getByTestId('agent-inbox');
      await inbox.waitFor();
      assert.match(await inbox.innerText(), new RegExp(`${server.base}/a2a/inbox`));
      await inbox.getByRole('button', { name: /Show card/ }).click();
      await inbox.getByText('"Inbox"').first().waitFor();
      await page.getByTestId('peer-url').fill(`${peerServer.base}/a2a/ops`);
      await page.getByLabel('Id (optional)').fill('ops-two');
      // The card is read and shown first; nothing is stored yet.
      await page.getByRole('button', { name: 'Read its card' }).click();
      const preview = page.getByTestId('peer-preview');
      await preview.waitFor();
      assert.match(await preview.innerText(), /^Ops/);
      assert.equal((await api(server, '/api/peers')).body.peers.length, 0);
      await page.getByRole('button', { name: 'Add this peer' }).click();
      const added = page.getByTestId('peer-added');
      await added.waitFor();
      assert.match(await added.innerText(), /Added ops/i);
      const card = page.getByTestId('peer-ops-two');
      await card.waitFor();
      await card.getByRole('button', { name: 'Check now' }).click();
      await card.getByText('reachable').waitFor();
      await card.getByRole('button', { name: 'New webhook subscription' }).click();
      const sub = card.getByTestId('subscription');
      await sub.waitFor();
      assert.match(await sub.innerText(), new RegExp(`${server.base}/webhooks/`));
      const peers = await api(server, '/api/peers');
      assert.ok(peers.body.peers.some((p) => p.id === 'ops-two'));
      await page.screenshot({ path: join(output, 'agents.png'), fullPage: true });
    } finally {
      await peerServer.stop();
    }
  });

  test('a peer whose card changed shows a banner live, with what changed; Trust the new card clears it', async () => {
    const peerServer = await startServer();
    // The peer's card, served by a small server here so that it can change.
    const card = await (await fetch(`${peerServer.base}/a2a/ops/.well-known/agent-card.json`)).json();
    delete card.signatures;
    let served = card;
    const cards = createServer((req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(served));
    });
    await new Promise((ok) => cards.listen(0, '127.0.0.1', ok));
    const cardUrl = `http://127.0.0.1:${cards.address().port}/agent-card.json`;
    try {
      const added = await api(server, '/api/peers', { method: 'POST', body: JSON.stringify({ id: 'pinned', url: cardUrl }) });
      assert.equal(added.status, 201, JSON.stringify(added.body));
      served = { ...card, skills: [...card.skills, { id: 'wire-money', name: 'Wire money', description: 'x', tags: [] }] };
      const page = await fresh();
      await page.keyboard.press('g');
      await page.keyboard.press('a');
      const peer = page.getByTestId('peer-pinned');
      await peer.waitFor();
      assert.equal(await page.getByTestId('card-change-pinned').count(), 0);
      // Read elsewhere (the sweep, the CLI): the open page learns it from the event stream.
      assert.equal((await api(server, '/api/peers/pinned/refresh', { method: 'POST' })).status, 200);
      const banner = page.getByTestId('card-change-pinned');
      await banner.waitFor();
      const text = await banner.innerText();
      assert.match(text, /card changed/i);
      assert.match(text, /skills/);
      assert.match(text, /wire-money/);
      await page.screenshot({ path: join(output, 'peer-card-changed.png'), fullPage: true });
      await page.getByTestId('trust-pinned').click();
      await banner.waitFor({ state: 'detached' });
      const peers = await api(server, '/api/peers');
      const p = peers.body.peers.find((x) => x.id === 'pinned');
      assert.equal(p.cardChange ?? null, null);
      assert.ok(p.pin.skills.includes('wire-money'));
    } finally {
      await api(server, '/api/peers/pinned', { method: 'DELETE' });
      cards.close();
      await peerServer.stop();
    }
  });

  test('chains: a config rule is read-only, an API rule is added, edited, disabled and removed; gated hops are released and dropped', async () => {
    const page = await fresh();
    await page.keyboard.press('g');
    await page.keyboard.press('c');
    await page.getByRole('heading', { name: 'Chains' }).waitFor();
    const fromConfig = page.getByTestId('chain-notify-ci');
    await fromConfig.waitFor();
    assert.match(await fromConfig.innerText(), /from config[\s\S]*agent ops → completed[\s\S]*push to https:\/\/hooks\.example\.com\/ci/);
    assert.equal(await fromConfig.getByRole('button', { name: 'Edit' }).count(), 0);

    // Add: keyboard n opens the form.
    await page.keyboard.press('n');
    await page.getByTestId('chain-id').fill('tell-the-channel');
    await page.getByLabel('Gate: hold each hop for me to release').check();
    await page.getByLabel('rejected').check();
    await page.getByTestId('chain-url').fill('http://127.0.0.1:9/channel');
    await page.getByLabel('Auth scheme').fill('Bearer');
    await page.getByLabel('Token').fill('channel-token');
    await page.getByRole('button', { name: 'Add rule' }).click();
    const added = page.getByTestId('chain-tell-the-channel');
    await added.waitFor();
    let rules = (await api(server, '/api/chains')).body.rules;
    let rule = rules.find((r) => r.id === 'tell-the-channel');
    assert.equal(rule.source, 'api');
    assert.equal(rule.gate, true);
    assert.deepEqual(rule.trigger.states.sort(), ['completed', 'rejected']);
    assert.equal(rule.action.url, 'http://127.0.0.1:9/channel');

    // An invalid rule is refused with the server's message.
    ui.expectError(/^HTTP 400 POST .*\/api\/chains$/);
    await page.keyboard.press('n');
    await page.getByTestId('chain-url').fill('ftp://127.0.0.1/x');
    await page.getByRole('button', { name: 'Add rule' }).click();
    await page.locator('.chain-form .error').waitFor();
    await page.getByRole('button', { name: 'Cancel' }).click();

    // Edit, disable, remove.
    await added.getByRole('button', { name: 'Edit' }).click();
    await page.getByLabel('Gate: hold each hop for me to release').uncheck();
    await page.getByRole('button', { name: 'Save rule' }).click();
    await until(async () => (await api(server, '/api/chains')).body.rules.find((r) => r.id === 'tell-the-channel')?.gate === false, 'the edit');
    await added.getByLabel('Rule tell-the-channel enabled').uncheck();
    await until(async () => (await api(server, '/api/chains')).body.rules.find((r) => r.id === 'tell-the-channel')?.enabled === false, 'disabled');
    await added.getByRole('button', { name: 'Remove' }).click();
    await added.getByRole('button', { name: 'Really remove' }).click();
    await added.waitFor({ state: 'detached' });
    rules = (await api(server, '/api/chains')).body.rules;
    assert.ok(!rules.some((r) => r.id === 'tell-the-channel'));

    // Completed ops tasks (bulk approve, triage) each hold a gated hop.
    const gated = page.locator('tr[data-testid^="hop-"]', { hasText: 'gated' });
    await until(async () => (await gated.count()) >= 2, 'gated hops');
    // Each hop says whose task fired it and what that task asked, and where
    // the rule sends it; its two answers sit side by side.
    const row = gated.first();
    const [from, to] = await Promise.all([row.getByTestId('hop-from').innerText(), row.getByTestId('hop-to').innerText()]);
    const rowId = await row.getAttribute('data-testid');
    const firedBy = (await api(server, '/api/chains/hops?limit=50')).body.hops.find((h) => `hop-${h.id}` === rowId);
    assert.equal(firedBy.parent.agentId, 'ops');
    assert.ok(firedBy.parent.preview.length > 0, JSON.stringify(firedBy));
    assert.equal(from.replace(/\s+/g, ' ').trim(), `Ops ${firedBy.parent.preview}`);
    assert.equal(to.trim(), 'push to https://hooks.example.com/ci');
    const [release, drop] = await Promise.all(
      ['Release', 'Drop'].map((name) => row.getByRole('button', { name }).boundingBox()),
    );
    assert.equal(Math.round(release.y), Math.round(drop.y), 'Release and Drop on one line');
    const first = await gated.first().getAttribute('data-testid');
    await gated.first().getByRole('button', { name: 'Release' }).click();
    const second = await until(async () => {
      const id = await gated.first().getAttribute('data-testid');
      return id !== first && id;
    }, 'the released hop to leave the gated ones');
    await page.getByTestId(second).getByRole('button', { name: 'Drop' }).click();
    const hops = async () => (await api(server, '/api/chains/hops?limit=50')).body.hops;
    await until(async () => (await hops()).find((h) => `hop-${h.id}` === second)?.state === 'dropped', 'the drop');
    const released = (await hops()).find((h) => `hop-${h.id}` === first);
    assert.notEqual(released.state, 'gated');
    await page.getByTestId(second).getByText('dropped', { exact: true }).waitFor();
    await page.screenshot({ path: join(output, 'chains.png') });
    // The task the hop came from shows it as a chain link.
    await page.getByTestId(second).getByTestId('hop-from').getByRole('button').click();
    await page.getByTestId('chain-links').waitFor();
    assert.match(await page.getByTestId('chain-links').innerText(), /rule notify-ci · dropped/);
  });

  /**
   * A peer that starts a task for every message (as FastA2A does): a proxy
   * in front of a second server drops the decision's taskId, so the peer
   * answers it with a new task in the same context. `continued(local)`
   * has `local` ask the peer, answer its question, and wait for the new
   * task to complete; it returns both ids.
   */
  async function fastPeer() {
    let upstream;
    const proxy = createServer((req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        let body = Buffer.concat(chunks);
        if (body.length) {
          const rpc = JSON.parse(body.toString());
          if (rpc.params?.message?.messageId?.startsWith('decision-')) delete rpc.params.message.taskId;
          body = Buffer.from(JSON.stringify(rpc));
        }
        const headers = { ...req.headers, host: new URL(upstream).host, 'content-length': String(body.length) };
        const out = httpRequest(upstream + req.url, { method: req.method, headers }, (answer) => {
          res.writeHead(answer.statusCode, answer.headers);
          answer.pipe(res);
        });
        out.on('error', (e) => res.destroy(e));
        out.end(body);
      });
    });
    await new Promise((r) => proxy.listen(0, '127.0.0.1', r));
    const proxyBase = `http://127.0.0.1:${proxy.address().port}`;
    const dir = mkdtempSync(join(tmpdir(), 'countersign-ui-peer-'));
    const config = join(dir, 'peer.toml');
    writeFileSync(
      config,
      `public_url = "${proxyBase}"
[outbound]
allow = ["127.0.0.1"]

[[agents]]
id = "fast"
name = "Release bot"
backend = "scripted"
[[agents.rules]]
message_id_prefix = "decision-"
steps = [{ complete = "Shipped to eu-west" }]
[[agents.rules]]
text = "(?i)^ship"
steps = [{ status = { state = "input-required", text = "Ship to which region?" } }]
`,
    );
    const peerServer = await startServer({ config });
    upstream = peerServer.base;
    return {
      async continued(local) {
        const added = await api(local, '/api/peers', { method: 'POST', body: JSON.stringify({ id: 'release', url: `${proxyBase}/a2a/fast` }) });
        assert.equal(added.status, 201, JSON.stringify(added.body));
        const started = await api(local, '/api/peers/release/tasks', { method: 'POST', body: JSON.stringify({ text: 'Ship 2.4?' }) });
        assert.equal(started.status, 201, JSON.stringify(started.body));
        const first = started.body.task.id;
        await until(async () => (await api(local, `/api/tasks/${first}`)).body.openTurn, 'the question to be parked');
        const decided = await api(local, `/api/tasks/${first}/decision`, { method: 'POST', body: JSON.stringify({ kind: 'reply', text: 'eu-west' }) });
        assert.equal(decided.status, 200, JSON.stringify(decided.body));
        const next = await until(async () => (await api(local, `/api/tasks/${first}`)).body.continuedIn, 'the continuation');
        await until(
          async () => (await api(local, `/api/tasks/${next}`)).body.task.status.state === 'TASK_STATE_COMPLETED',
          'the new task to complete',
        );
        return { first, next };
      },
      async stop() {
        await peerServer.stop();
        await new Promise((r) => proxy.close(r));
      },
    };
  }

  test('a peer that answers a decision with a new task: each task links to the other', async () => {
    const peer = await fastPeer();
    try {
      const { first, next } = await peer.continued(server);

      const page = await fresh();
      await page.evaluate((id) => (location.hash = `#/task/${encodeURIComponent(id)}`), first);
      const links = page.getByTestId('continuation');
      await links.waitFor();
      assert.match(await links.innerText(), new RegExp(`in\\s+${next}\\s+the peer answered the decision with a new task`));
      await page.getByTestId('decided').waitFor();
      await links.getByRole('button', { name: next }).click();
      await until(async () => page.url().endsWith(`#/task/${encodeURIComponent(next)}`), 'the new task to open');
      await page.getByText('Shipped to eu-west').first().waitFor();
      await until(async () => /from\s/.test(await page.getByTestId('continuation').innerText()), 'the link back');
      assert.match(await page.getByTestId('continuation').innerText(), new RegExp(`from\\s+${first}`));
      await page.screenshot({ path: join(output, 'continuation.png') });
    } finally {
      await peer.stop();
    }
  });

  test('once retention archives the task a continuation came from, its link opens the archived record', async () => {
    const peer = await fastPeer();
    // A server of its own, bounded to one task: on its next start,
    // retention archives the continued task and keeps the new one.
    const dir = mkdtempSync(join(tmpdir(), 'countersign-ui-bounded-'));
    const config = join(dir, 'bounded.toml');
    writeFileSync(config, '[outbound]\nallow = ["127.0.0.1"]\n\n[retention]\nmax_tasks = 1\n');
    let local = await startServer({ config, dataDir: join(dir, 'data') });
    try {
      const { first, next } = await peer.continued(local);
      local = await restartUntilArchived(local, config, first, 'the first task to be archived');
      const page = await openTask(local, next);
      const links = page.getByTestId('continuation');
      await links.waitFor();
      assert.match(
        await links.innerText(),
        new RegExp(`from\\s+${first}\\s+its peer answered the decision with this task \\(it has since been archived\\)`),
      );
      // The link opens the task from the archive: its conversation and the
      // decision taken, read-only.
      ui.expectError(new RegExp(`^HTTP 404 GET .*/api/tasks/${first}$`));
      await links.getByRole('button', { name: first }).click();
      const banner = page.getByTestId('archived-banner');
      await banner.waitFor();
      assert.match(await banner.innerText(), /^Archived /);
      assert.ok((await banner.innerText()).includes(`countersign archive show ${first}`));
      await page.getByText('Ship to which region?').first().waitFor();
      assert.match(await page.getByTestId('decided').innerText(), /Decided: reply/);
      assert.equal(await page.getByTestId('task-gone').count(), 0);
      await page.screenshot({ path: join(output, 'task-archived.png') });
    } finally {
      await local.stop();
      await peer.stop();
    }
  });

  test('once retention archives the task a chain came from, both ends still link to each other', async () => {
    // B: an inbox the chain sends to. A: bounded to one task, with a rule
    // that sends what its inbox approves on to B.
    const peerB = await startServer();
    const dir = mkdtempSync(join(tmpdir(), 'countersign-ui-chained-'));
    const config = join(dir, 'chained.toml');
    writeFileSync(
      config,
      `[outbound]\nallow = ["127.0.0.1"]\n\n[retention]\nmax_tasks = 1\n\n[[agents]]\nid = "inbox"\n\n` +
        `[[peers]]\nid = "b"\nurl = "${peerB.base}/a2a/inbox"\n\n` +
        `[[chains]]\nid = "to-b"\ntrigger = { agent = "inbox" }\n` +
        `action = { kind = "send", peer = "b", template = "Approved on A: {{request.text}}" }\n`,
    );
    let local = await startServer({ config, dataDir: join(dir, 'data') });
    try {
      const parent = (await send(local.base, 'inbox', 'Ship the chained release?')).id;
      await until(async () => (await api(local, `/api/tasks/${parent}`)).body.openTurn, 'the task to be parked');
      const decided = await api(local, `/api/tasks/${parent}/decision`, { method: 'POST', body: JSON.stringify({ kind: 'approve' }) });
      assert.equal(decided.status, 200, JSON.stringify(decided.body));
      const hop = await until(async () => {
        const to = (await api(local, `/api/tasks/${parent}`)).body.chain?.children?.[0];
        return to?.state === 'delivered' && to.taskId ? to : null;
      }, 'the hop to B');
      const child = hop.taskId;
      // On its next start, retention archives the approved task; the task
      // it chained to stays (it waits on B).
      local = await restartUntilArchived(local, config, parent, 'the approved task to be archived');
      const page = await openTask(local, child);
      const links = page.getByTestId('chain-links');
      await links.waitFor();
      assert.match(await links.innerText(), new RegExp(`from\\s+${parent}\\s+rule to-b \\(it has since been archived\\)`));
      await page.screenshot({ path: join(output, 'chain-archived.png') });
      // The link opens the archived task, which links on to the task here.
      ui.expectError(new RegExp(`^HTTP 404 GET .*/api/tasks/${parent}$`));
      await links.getByRole('button', { name: parent }).click();
      await page.getByTestId('archived-banner').waitFor();
      await page.getByText('Ship the chained release?').first().waitFor();
      const back = page.getByTestId('chain-links');
      await back.waitFor();
      assert.match(await back.innerText(), new RegExp(`to\\s+${child}\\s+rule to-b · delivered`));
      assert.equal(await back.getByTestId('chain-archived').count(), 0, 'the child is still here');
      await back.getByRole('button', { name: child }).click();
      await until(async () => page.url().endsWith(`#/task/${encodeURIComponent(child)}`), 'the child to open');
      await page.getByText('Approved on A: Ship the chained release?').first().waitFor();
      assert.equal(await page.getByTestId('archived-banner').count(), 0);
      // The list of hops says which end was archived.
      await page.keyboard.press('g');
      await page.keyboard.press('c');
      const listed = page.getByTestId(`hop-${hop.hopId}`);
      await listed.waitFor();
      assert.match(await listed.getByTestId('hop-from').innerText(), /\(archived\)/);
      assert.equal(await listed.getByTestId('hop-to').getByTestId('hop-archived').count(), 0);
    } finally {
      await local.stop();
      await peerB.stop();
    }
  });

  test('a task in neither the database nor the archive (a stale link) says so; no Retry', async () => {
    const page = await fresh();
    const id = '01900000-0000-7000-8000-00000000dead';
    ui.expectError(new RegExp(`^HTTP 404 GET .*/api/tasks/${id}$`));
    ui.expectError(new RegExp(`^HTTP 404 GET .*/api/archives/tasks/${id}$`));
    await page.evaluate((id) => (location.hash = `#/task/${encodeURIComponent(id)}`), id);
    const gone = page.getByTestId('task-gone');
    await gone.waitFor();
    const text = await gone.innerText();
    assert.match(text, /This task is not here/);
    assert.ok(text.includes(`Neither the database nor the archive holds task ${id}`), text);
    assert.equal(await page.getByRole('button', { name: 'Retry' }).count(), 0);
    await page.screenshot({ path: join(output, 'task-gone.png') });
  });

  test('settings are saved by the server and the theme applies at once', async () => {
    const page = await fresh();
    // Once the window has read the settings, every further read is slow: the
    // screen's own re-read lands after the edits below and must keep them.
    // Reads are counted by the page's own resource timing: Playwright's
    // "response" event is now and then not emitted for a routed request.
    const reads = () =>
      page.evaluate(() => performance.getEntriesByType('resource').filter((e) => e.name.endsWith('/api/settings')).length);
    await until(async () => (await reads()) > 0, 'the first read of the settings');
    let routed = 0;
    await page.route('**/api/settings', async (route) => {
      if (route.request().method() === 'GET') {
        routed += 1;
        await new Promise((r) => setTimeout(r, 400));
      }
      await route.fallback();
    });
    const readsBefore = await reads();
    await page.keyboard.press('g');
    await page.keyboard.press('s');
    await page.getByRole('heading', { name: 'Settings' }).waitFor();
    await page.getByTestId('set-webhook').fill('https://hooks.example.com');
    await page.getByLabel('Dark').check();
    assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'dark');
    await until(async () => (await reads()) > readsBefore, 'the Settings screen re-reading its settings');
    assert.equal(routed, 1, 'the re-read went through the slow route');
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    assert.equal(await page.getByTestId('set-webhook').inputValue(), 'https://hooks.example.com');
    assert.equal(await page.getByLabel('Dark').isChecked(), true);
    assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'dark');
    // Muting names each agent and peer with what it is and, when its name
    // differs, its id: two named alike stay apart.
    const muteDemo = page.getByTestId('mute-demo');
    assert.match(await page.locator('label', { has: muteDemo }).innerText(), /^\s*Report writer\s+agent demo\s*$/);
    await muteDemo.check();
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByTestId('settings-saved').waitFor();
    await page.screenshot({ path: join(output, 'settings.png') });
    const saved = await api(server, '/api/settings');
    assert.equal(saved.body.settings.webhookPublicUrl, 'https://hooks.example.com');
    assert.equal(saved.body.settings.theme, 'dark');
    assert.deepEqual(saved.body.settings.notifications.mutedAgents, ['demo']);
    await muteDemo.uncheck();
    await page.getByLabel('Follow the system').check();
    await page.getByRole('button', { name: 'Save' }).click();
    await until(async () => (await api(server, '/api/settings')).body.settings.theme === 'system', 'theme saved');
    assert.deepEqual((await api(server, '/api/settings')).body.settings.notifications.mutedAgents ?? [], []);
    // A theme tried but not saved is dropped on leaving the screen.
    await page.getByLabel('Light').check();
    assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'light');
    await page.getByRole('link', { name: /^Queue/ }).click();
    await page.locator('.vlist, [data-testid=empty-queue]').first().waitFor();
    assert.equal(await page.evaluate(() => document.documentElement.dataset.theme ?? 'system'), 'system');
  });

  test('settings that cannot be read are not offered as defaults to save over them; Try again reads them', async () => {
    await ui?.close();
    ui = null;
    const broken = await openPage(browser, server.uiUrl);
    ui = broken;
    const page = broken.page;
    let failing = true;
    await page.route('**/api/settings', (route) =>
      failing && route.request().method() === 'GET'
        ? route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify({ error: { code: 503, message: 'storage busy' } }) })
        : route.fallback(),
    );
    await page.reload();
    await page.locator('.layout').waitFor();
    await page.keyboard.press('g');
    await page.keyboard.press('s');
    await page.getByTestId('settings-loading').getByText('could not be read').waitFor();
    assert.match(await page.locator('.settings-form .error').innerText(), /storage busy/);
    assert.equal(await page.getByTestId('set-webhook').isDisabled(), true);
    assert.equal(await page.getByRole('button', { name: 'Save' }).isDisabled(), true);
    failing = false;
    await page.getByRole('button', { name: 'Try again' }).click();
    await until(() => page.getByTestId('set-webhook').isEnabled(), 'the form to open');
    const saved = (await api(server, '/api/settings')).body.settings;
    assert.equal(await page.getByTestId('set-webhook').inputValue(), saved.webhookPublicUrl ?? '');
    assert.equal(await page.getByTestId('settings-loading').count(), 0);
    assert.equal(await page.getByRole('button', { name: 'Save' }).isEnabled(), true);
    // The refused reads show up as errors of the page: expected here.
    await broken.close();
    ui = null;
  });

  test('? shows every key; the queue works at 1024×640', async () => {
    const page = await fresh({ width: 1024, height: 640 });
    for (let i = 0; i < 4; i++) await send(server.base, 'inbox', `Small screen check ${i}: may I proceed with the rollout?`);
    await until(async () => (await page.locator('.qrow').count()) >= 4, 'rows');
    await page.keyboard.press('?');
    const dialog = page.getByRole('dialog', { name: 'Keys' });
    await dialog.waitFor();
    for (const k of ['j / k', 'Enter', 'a', 'r', 'x', '/', 'g q', 'g h', '?']) {
      assert.ok(await dialog.locator('kbd', { hasText: k }).count(), k);
    }
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
    assert.equal(overflow, false, 'no horizontal scroll at 1024×640');
    await focusList(page);
    await page.keyboard.press('j');
    await page.screenshot({ path: join(output, 'queue.png') });
  });

  test('after the server restarts, the UI reconnects and resyncs without duplicates', async () => {
    const page = await fresh();
    const before = await send(server.base, 'inbox', 'Before the restart');
    await row(page, before.id).waitFor();
    const port = new URL(server.base).port;
    await server.stop({ keepData: true });
    await until(async () => /Reconnecting/.test(await page.locator('.conn').innerText()), 'the UI to notice');
    server = await startServer({ dataDir: server.dataDir, bind: `127.0.0.1:${port}`, removeOnStop: true });
    const afterTask = await send(server.base, 'inbox', 'While the UI was reconnecting');
    await until(async () => /Live/.test(await page.locator('.conn').innerText()), 'the stream to come back', 30_000);
    await row(page, afterTask.id).waitFor();
    const ids = await page.locator('.qrow').evaluateAll((rows) => rows.map((r) => r.dataset.taskId));
    assert.equal(new Set(ids).size, ids.length, 'no duplicate rows');
    assert.ok(ids.includes(before.id));
  });
});

describe('a full disk', () => {
  test('the UI says the server cannot save, until it can again', async () => {
    const full = await startServer({ fileLimitKib: 2048 });
    const page = await openPage(browser, full.uiUrl);
    try {
      await page.page.getByRole('heading', { name: /Queue/ }).waitFor();
      const big = 'a request that takes room '.repeat(240);
      let refused = 0;
      for (let n = 0; n < 3000 && refused < 3; n++) {
        try {
          await send(full.base, 'inbox', big, { messageId: `full-${n}` });
        } catch (e) {
          assert.match(e.message, /storage failure/);
          refused++;
        }
      }
      assert.equal(refused, 3, 'the disk never filled');
      const alert = page.page.getByRole('alert').filter({ hasText: 'Countersign cannot save' });
      await alert.waitFor();
      assert.match(await alert.innerText(), /nothing already saved is lost/);
      await page.page.screenshot({ path: join(output, 'storage-alert.png') });
      full.liftFileLimit();
      await until(async () => {
        try {
          await send(full.base, 'inbox', 'After there was room again');
          return true;
        } catch {
          return false;
        }
      }, 'a write once the limit was lifted');
      await alert.waitFor({ state: 'detached' });
      const p = await page.problems();
      assert.deepEqual(p.csp, [], 'CSP violations');
      assert.deepEqual(p.errors, [], 'page errors');
    } finally {
      await page.close();
      await full.stop();
    }
  });
});
