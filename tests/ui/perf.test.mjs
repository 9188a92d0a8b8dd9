// A queue of 10,000 parked tasks: the list stays virtual (a few dozen rows
// in the page at any depth), scrolls to the last task, and the page keeps
// answering keys. Times are measured and written to
// output/measurements-10k.json, never asserted.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { launch, openPage, output, rpc, startServer, until } from './harness.mjs';

const N = 10_000;
const CONCURRENCY = 48;
let server;
let browser;
let ui;
const measured = { tasks: N };

before(async () => {
  server = await startServer();
  browser = await launch();
});

after(async () => {
  await ui?.close();
  await browser?.close();
  await server?.stop();
  writeFileSync(join(output, 'measurements-10k.json'), JSON.stringify(measured, null, 2) + '\n');
});

test('10,000 parked tasks: virtual list, scrolls to the end, stays responsive', { timeout: 900_000 }, async () => {
  const t0 = Date.now();
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < N; i = next++) {
      const n = String(i).padStart(5, '0');
      await rpc(server.base, 'inbox', 'SendMessage', {
        message: { messageId: `seed-${n}`, role: 'ROLE_USER', parts: [{ text: `Seed ${n}: may I run job ${n}?` }] },
      });
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  measured.seedSeconds = (Date.now() - t0) / 1000;

  ui = await openPage(browser, server.uiUrl);
  const page = ui.page;
  await page.locator('.qrow').first().waitFor();
  measured.firstQueueRenderMs = Math.round(await page.evaluate(() => performance.now()));
  await until(async () => (await page.getByTestId('queue-total').innerText()) === `${N} parked`, 'the total');
  assert.equal(await page.getByTestId('count-all').innerText(), String(N));

  // Page the whole list in by scrolling to its end until every row is there.
  const paging = await page.evaluate(async (n) => {
    const list = document.querySelector('.vlist');
    const start = performance.now();
    for (let guard = 0; guard < 2000 && list.scrollHeight / 52 < n; guard++) {
      list.scrollTop = list.scrollHeight;
      await new Promise((r) => setTimeout(r, 25));
    }
    return { ms: Math.round(performance.now() - start), rows: list.scrollHeight / 52 };
  }, N);
  measured.pageInAllMs = paging.ms;
  assert.equal(paging.rows, N);
  // Then scroll from top to bottom, one step per frame, counting rows in the page.
  const scroll = await page.evaluate(async () => {
    const list = document.querySelector('.vlist');
    const frame = () => new Promise((r) => requestAnimationFrame(r));
    list.scrollTop = 0;
    await frame();
    const gaps = [];
    let maxRows = 0;
    let emptyFrames = 0;
    let last = performance.now();
    const start = last;
    while (list.scrollTop + list.clientHeight < list.scrollHeight - 2) {
      list.scrollTop += 1300; // 25 rows a frame
      await frame();
      const now = performance.now();
      gaps.push(now - last);
      last = now;
      const rows = document.querySelectorAll('.qrow').length;
      if (rows === 0) emptyFrames++;
      maxRows = Math.max(maxRows, rows);
    }
    gaps.sort((a, b) => a - b);
    const r = (x) => Math.round(x * 10) / 10;
    return {
      ms: Math.round(performance.now() - start),
      frames: gaps.length,
      medianFrameMs: r(gaps[Math.floor(gaps.length / 2)]),
      p95FrameMs: r(gaps[Math.floor(gaps.length * 0.95)]),
      maxFrameMs: r(gaps[gaps.length - 1]),
      maxRowsInPage: maxRows,
      emptyFrames,
    };
  });
  assert.equal(scroll.emptyFrames, 0, 'every frame shows rows');
  measured.scrollToEnd = scroll;
  assert.ok(scroll.maxRowsInPage < 100, `rows in the page: ${scroll.maxRowsInPage}`);
  // Newest first: the oldest task is the last row.
  const lastRow = page.locator('.qrow').last();
  await until(async () => /Seed 00000: may I run job 00000\?/.test(await lastRow.innerText()), 'the last row');

  // Keys still answer at the bottom: focus a row there, move with k/j.
  const deep = page.locator('.qrow').nth(-5);
  await deep.locator('.agent').click();
  await page.locator('.vlist').focus();
  const keyMs = await page.evaluate(async () => {
    const frame = () => new Promise((r) => requestAnimationFrame(r));
    const t = performance.now();
    for (let i = 0; i < 20; i++) {
      window.dispatchEvent(new KeyboardEvent('keydown', { key: i % 2 ? 'j' : 'k', bubbles: true }));
      await frame();
    }
    return (performance.now() - t) / 20;
  });
  measured.keyMoveMs = Math.round(keyMs * 10) / 10;

  // Opening a task: from Enter to its decision bar in the page, five times.
  const opens = [];
  for (let i = 0; i < 5; i++) {
    await page.locator('.vlist').waitFor();
    opens.push(
      await page.evaluate(
        () =>
          new Promise((resolve) => {
            const t = performance.now();
            const obs = new MutationObserver(() => {
              if (document.querySelector('.decision-bar')) {
                obs.disconnect();
                resolve(performance.now() - t);
              }
            });
            obs.observe(document.body, { subtree: true, childList: true });
            window.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true }));
          }),
      ),
    );
    await page.keyboard.press('Escape');
    await page.keyboard.press('k');
  }
  // Back from the tasks, the place deep in the list is kept.
  await page.locator('.qrow.focused').waitFor();
  assert.match(await page.locator('.qrow.focused').innerText(), /Seed 000\d\d/);
  opens.sort((a, b) => a - b);
  measured.openTaskMs = { median: Math.round(opens[2]), max: Math.round(opens[4]), all: opens.map(Math.round) };
  await page.screenshot({ path: join(output, 'queue-10k.png') });
  const p = await ui.problems();
  assert.deepEqual(p.csp, []);
  assert.deepEqual(p.errors, []);
});
