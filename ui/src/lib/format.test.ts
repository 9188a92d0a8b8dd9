import { describe, expect, it } from 'vitest';
import { actorLabel, deliveryLabel, deliveryState, shortTime, time } from './format';

describe('shortTime', () => {
  const now = new Date(2026, 10, 26, 15, 0, 0).getTime();

  it('gives the clock time for today, without the date', () => {
    const t = new Date(2026, 10, 26, 9, 5, 7).getTime();
    const s = shortTime(t, now);
    expect(s).toMatch(/0?9\D05\D07/);
    expect(s).not.toContain('2026');
    expect(s.length).toBeLessThan(time(t).length);
  });

  it('gives the day without the year for this year, and the date before that', () => {
    const thisYear = shortTime(new Date(2026, 2, 3, 9, 5).getTime(), now);
    expect(thisYear).toMatch(/3/);
    expect(thisYear).not.toContain('2026');
    expect(shortTime(new Date(2024, 2, 3, 9, 5).getTime(), now)).toContain('2024');
  });

  it('passes through what is not a time', () => {
    expect(shortTime(null, now)).toBe('');
    expect(shortTime('soon', now)).toBe('soon');
  });
});

describe('decision words', () => {
  it('say where a decision was made and how far its answer got', () => {
    expect(actorLabel('ui')).toBe('in the app');
    expect(actorLabel('cli')).toBe('from the CLI');
    expect(actorLabel('ops-bot')).toBe('by ops-bot');
    expect(deliveryState('delivered')).toBe('delivered to the agent');
    expect(deliveryState('pending')).toBe('being delivered to the agent');
    expect(deliveryState('failed')).toMatch(/failed/);
  });
});

describe('deliveryLabel', () => {
  it('names every kind the outbox holds in words, and passes an unknown one through', () => {
    expect(deliveryLabel('start')).toBe('task sent to a peer');
    expect(deliveryLabel('reread')).toBe('re-read of a pushed task');
    expect(deliveryLabel('chain')).toBe('chain hop');
    expect(deliveryLabel('later')).toBe('later');
  });
});
