import { describe, expect, it } from 'vitest';
import { Chord, KEYS } from './keys';
import { tokenize } from './highlight';
import { parseRoute, routeHash } from './app';

describe('keys', () => {
  it('recognises g-chords within their window only', () => {
    const c = new Chord(1000);
    expect(c.feed('g', 0)).toBeNull();
    expect(c.waiting).toBe(true);
    expect(c.feed('q', 500)).toBe('g q');
    expect(c.feed('g', 600)).toBeNull();
    expect(c.feed('h', 2000)).toBeNull();
    expect(c.feed('j', 2100)).toBeNull();
  });

  it('documents every key the issue asks for', () => {
    const all = KEYS.map((k) => k.keys).join(' | ');
    for (const k of ['j / k', 'Enter', 'a', 'r', 'x', '/', 'g q', 'g h', '?']) expect(all).toContain(k);
  });

  it('names the screens where the decision keys and n work', () => {
    const where = (keys: string) => KEYS.find((k) => k.keys === keys)?.where;
    for (const k of ['a', 'r', 'x']) expect(where(k)).toBe('queue, task');
    expect(where('n')).toBe('chains');
    expect(where('/')).toBe('queue, tasks, history');
  });
});

describe('routes', () => {
  it('round-trips screens and task ids', () => {
    expect(parseRoute('#/history')).toEqual({ screen: 'history' });
    expect(parseRoute('#token=abc')).toEqual({ screen: 'queue' });
    expect(parseRoute('#/nowhere')).toEqual({ screen: 'queue' });
    const r = { screen: 'task' as const, taskId: 'a/b c' };
    expect(parseRoute(routeHash(r))).toEqual(r);
  });
});

describe('highlight tokenizer', () => {
  it('keeps the text exactly and marks comments, strings, numbers, keywords', () => {
    const code = 'def f(x):\n    # note\n    return "a<b>" + 42\n';
    const toks = tokenize(code, 'python');
    expect(toks.map((t) => t.text).join('')).toBe(code);
    expect(toks.filter((t) => t.kind !== 'plain').map((t) => [t.kind, t.text])).toEqual([
      ['keyword', 'def'],
      ['comment', '# note'],
      ['keyword', 'return'],
      ['string', '"a<b>"'],
      ['number', '42'],
    ]);
  });

  it('does not take # for a comment where it is none', () => {
    const toks = tokenize('let a = b # c;', 'js');
    expect(toks.some((t) => t.kind === 'comment')).toBe(false);
    expect(toks.map((t) => t.text).join('')).toBe('let a = b # c;');
  });
});
