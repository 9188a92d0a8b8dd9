import { defineConfig } from 'vitest/config';
import { svelte } from '@sveltejs/vite-plugin-svelte';

// The built UI runs under a strict CSP (`script-src 'self'; style-src
// 'self'`): no inline scripts or styles may be emitted.
export default defineConfig({
  plugins: [svelte()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // The polyfill is an inline-free module, but modern engines (Chromium,
    // WebKitGTK) need none.
    modulePreload: { polyfill: false },
    // Never inline assets as data: URIs into scripts or styles.
    assetsInlineLimit: 0,
    cssCodeSplit: false,
    target: 'es2022',
  },
  test: {
    environment: 'node',
    include: ['src/**/*.test.ts'],
  },
});
