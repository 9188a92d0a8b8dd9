/** Settings saved by the server (`/api/settings`), and the theme applied. */
import { writable, type Readable } from 'svelte/store';
import type { Api, Settings, SettingsReply } from './api';

export const defaultSettings = (): Settings => ({
  bind: null,
  webhookPublicUrl: null,
  notifications: { enabled: true, sound: false, onlyWhenHidden: false, mutedAgents: [] },
  theme: 'system',
});

export interface SettingsState {
  settings: Settings;
  effective: SettingsReply['effective'] | null;
  loading: boolean;
  saving: boolean;
  error: string | null;
  savedAt: number | null;
}

export interface SettingsStore extends Readable<SettingsState> {
  load(): Promise<void>;
  save(s: Settings): Promise<void>;
}

/** Sets `data-theme` on the page: `light`, `dark`, or none (follow the OS). */
export function applyTheme(theme: Settings['theme'], root: HTMLElement = document.documentElement): void {
  if (theme === 'system') root.removeAttribute('data-theme');
  else root.setAttribute('data-theme', theme);
  try {
    localStorage.setItem('countersign.theme', theme);
  } catch {
    // Storage may be off; the server keeps the setting anyway.
  }
}

export function createSettings(api: Api): SettingsStore {
  const store = writable<SettingsState>({
    settings: defaultSettings(),
    effective: null,
    loading: false,
    saving: false,
    error: null,
    savedAt: null,
  });
  const { subscribe, update } = store;
  return {
    subscribe,
    async load() {
      update((s) => ({ ...s, loading: true, error: null }));
      try {
        const r = await api.settings();
        applyTheme(r.settings.theme);
        update((s) => ({ ...s, settings: r.settings, effective: r.effective, loading: false }));
      } catch (e) {
        update((s) => ({ ...s, loading: false, error: (e as Error).message }));
      }
    },
    async save(settings) {
      update((s) => ({ ...s, saving: true, error: null }));
      try {
        const r = await api.saveSettings(settings);
        applyTheme(r.settings.theme);
        update((s) => ({ ...s, settings: r.settings, effective: r.effective, saving: false, savedAt: Date.now() }));
      } catch (e) {
        update((s) => ({ ...s, saving: false, error: (e as Error).message }));
      }
    },
  };
}
