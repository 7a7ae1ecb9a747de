// The dashboard's build: one page app, served by the plane under /dashboard/ from the folder this
// writes into the Python package (git-ignored; `make install` builds it).
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/dashboard/',
  // Preact's JSX through the bundler's own transform (no Babel, no plugin to keep in step).
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: '../src/trainyard/dashboard/static',
    emptyOutDir: true,
    assetsDir: 'assets',
    // Served offline from the plane: no module-preload polyfill fetching anything, no inlined
    // base64 fonts or images to hide from the asset folder.
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 200,
  },
});
