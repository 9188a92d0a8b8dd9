/**
 * Code block highlighting for sanitised HTML from the API. It reads a code
 * block's text and rebuilds it from text nodes in spans: no HTML is built
 * from the agent's strings. A small tokenizer instead of a library: the
 * blocks are short, every language gets the same few classes (comment,
 * string, number, keyword), and nothing is added to the bundle's trust base.
 */

const KEYWORDS = new Set(
  (
    'as async await break case catch class const continue def default del do elif else enum export extends ' +
    'false fn for from func function go if impl import in interface is let loop match mod module mut new nil ' +
    'none null package pass pub raise return self static struct super switch this throw true try type typeof ' +
    'use var void where while with yield SELECT FROM WHERE INSERT UPDATE DELETE INTO VALUES AND OR NOT'
  ).split(' '),
);

export type Token = { kind: 'comment' | 'string' | 'number' | 'keyword' | 'plain'; text: string };

const TOKEN =
  /(\/\/[^\n]*|#[^\n]*|\/\*[\s\S]*?\*\/|--[^\n]*)|("(?:\\[\s\S]|[^"\\\n])*"|'(?:\\[\s\S]|[^'\\\n])*'|`(?:\\[\s\S]|[^`\\])*`)|(\b\d[\d_]*(?:\.\d+)?(?:e[+-]?\d+)?\b|\b0x[0-9a-f]+\b)|([A-Za-z_][A-Za-z0-9_]*)/gi;

/** Splits code into tokens; concatenated, their text is the input. */
export function tokenize(code: string, language = ''): Token[] {
  const out: Token[] = [];
  let last = 0;
  const hashComments = /^(py|python|sh|bash|shell|ruby|rb|toml|yaml|yml|r|perl)$/.test(language);
  const dashComments = /^(sql|lua|haskell|hs)$/.test(language);
  for (const m of code.matchAll(TOKEN)) {
    const i = m.index ?? 0;
    let kind: Token['kind'] = 'plain';
    if (m[1] !== undefined) {
      const isHash = m[1].startsWith('#');
      const isDash = m[1].startsWith('--');
      if ((isHash && !hashComments) || (isDash && !dashComments)) {
        // Not a comment in this language: the match stays plain text.
        continue;
      }
      kind = 'comment';
    } else if (m[2] !== undefined) kind = 'string';
    else if (m[3] !== undefined) kind = 'number';
    else if (m[4] !== undefined && KEYWORDS.has(m[4])) kind = 'keyword';
    if (kind === 'plain') continue;
    if (i > last) out.push({ kind: 'plain', text: code.slice(last, i) });
    out.push({ kind, text: m[0] });
    last = i + m[0].length;
  }
  if (last < code.length) out.push({ kind: 'plain', text: code.slice(last) });
  return out;
}

/** Highlights every `pre > code` under `root` in place (text nodes only). */
export function highlightWithin(root: HTMLElement): void {
  for (const code of root.querySelectorAll('pre > code')) {
    if ((code as HTMLElement).dataset.highlighted) continue;
    const lang = /language-([\w+#-]+)/.exec(code.className)?.[1] ?? '';
    const text = code.textContent ?? '';
    const frag = document.createDocumentFragment();
    for (const t of tokenize(text, lang)) {
      if (t.kind === 'plain') frag.appendChild(document.createTextNode(t.text));
      else {
        const span = document.createElement('span');
        span.className = `tok-${t.kind}`;
        span.textContent = t.text;
        frag.appendChild(span);
      }
    }
    code.replaceChildren(frag);
    (code as HTMLElement).dataset.highlighted = '1';
  }
}
