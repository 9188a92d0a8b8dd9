import { getContext } from 'svelte';
import type { App, Route } from './app';

/** The running app, from the root component's context. */
export function useApp(): App {
  const ctx = getContext<{ app: App | null }>('app');
  if (!ctx?.app) throw new Error('the app is not running');
  return ctx.app;
}

export function useGo(): (r: Route) => void {
  return getContext<(r: Route) => void>('go');
}
