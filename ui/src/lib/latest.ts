/**
 * The latest run of an async read, for other work to wait on: a store's
 * refresh waits for the first page a new filter is reading rather than join
 * its own page to the rows of the filter before.
 */
export interface Latest {
  /** Starts a run; it is the one `settled` waits for until another starts. */
  start(): Promise<void>;
  /** Resolves once no run is in flight (runs started meanwhile included). */
  settled(): Promise<void>;
}

export function latest(run: () => Promise<void>): Latest {
  let current: Promise<void> | null = null;
  return {
    start() {
      const p = run();
      current = p;
      void p.finally(() => {
        if (current === p) current = null;
      });
      return p;
    },
    async settled() {
      while (current) await current;
    },
  };
}

/**
 * Orders reads that may answer out of order: each takes a number when it
 * starts (`begin`), and `newest(n)` says whether what it read may be shown,
 * which is so unless a read started later has been shown already.
 */
export interface Ordered {
  begin(): number;
  newest(seq: number): boolean;
}

export function ordered(): Ordered {
  let started = 0;
  let shown = 0;
  return {
    begin: () => ++started,
    newest(seq) {
      if (seq < shown) return false;
      shown = seq;
      return true;
    },
  };
}
