#!/usr/bin/env node
// Bundles the hosted page's browser code (run by `npm run build` after tsc). Any error exits non-zero.
'use strict';

const fs = require('fs');
const path = require('path');
const esbuild = require('esbuild');

const root = path.resolve(__dirname, '..');
const source = path.join(root, 'src', 'public', 'browser');
const outdir = path.join(root, 'dist', 'public');

const common = {
  bundle: true,
  minify: true,
  sourcemap: false,
  logLevel: 'error',
  absWorkingDir: root,
};

const builds = [
  { entryPoints: [path.join(source, 'form.ts')], outfile: path.join(outdir, 'form.js'), format: 'iife', target: 'es2019', platform: 'browser' },
  { entryPoints: [path.join(source, 'embed.ts')], outfile: path.join(outdir, 'embed.js'), format: 'iife', target: 'es2019', platform: 'browser' },
  // Also minified and syntax-checked, so a broken stylesheet fails the build too.
  { entryPoints: [path.join(source, 'form.css')], outfile: path.join(outdir, 'form.css'), loader: { '.css': 'css' } },
];

/** The API reference's renderer (GET /docs), copied as the `redoc` package ships it, with its licences. */
function copyRedoc() {
  const bundle = require.resolve('redoc/bundles/redoc.standalone.js');
  fs.mkdirSync(outdir, { recursive: true });
  for (const file of ['redoc.standalone.js', 'redoc.standalone.js.LICENSE.txt']) {
    fs.copyFileSync(path.join(path.dirname(bundle), file), path.join(outdir, file));
  }
}

Promise.all([...builds.map((options) => esbuild.build({ ...common, ...options })), Promise.resolve().then(copyRedoc)])
  .then(() => {
    process.stdout.write(`browser assets built in ${path.relative(root, outdir)}/\n`);
  })
  .catch((error) => {
    // esbuild has already printed the located errors; make sure the build stops.
    console.error(`build-browser failed: ${error.message}`);
    process.exit(1);
  });
