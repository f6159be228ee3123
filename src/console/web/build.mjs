// Bundles the web console (app/main.js and what it imports from node_modules) into OUTDIR:
// assets/app-HASH.js and assets/app-HASH.css, the icon as assets/favicon-HASH.svg, and
// index.html that loads them. Run by CMake (src/console/CMakeLists.txt): node build.mjs OUTDIR
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const outdir = process.argv[2];
if (!outdir) {
  console.error('usage: node build.mjs OUTDIR');
  process.exit(2);
}
let esbuild;
try {
  esbuild = await import('esbuild');
} catch (error) {
  console.error('build.mjs: esbuild is not installed; run npm ci at the repository root ' +
                '(scripts/deps.sh does): ' + error.message);
  process.exit(1);
}
const here = dirname(fileURLToPath(import.meta.url));
const result = await esbuild.build({
  entryPoints: { app: join(here, 'app', 'main.js') },
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2020'],
  outdir: join(outdir, 'assets'),
  entryNames: '[name]-[hash]',
  legalComments: 'eof',
  metafile: true,
  logLevel: 'warning',
});
const outputs = Object.keys(result.metafile.outputs).map((file) => relative(outdir, file));
const script = outputs.find((file) => file.endsWith('.js'));
const style = outputs.find((file) => file.endsWith('.css'));
if (!script || !style) {
  console.error('build.mjs: esbuild made no script or no style sheet: ' + outputs.join(', '));
  process.exit(1);
}
// The icon, named by its content like the bundle, so that it too is cached for good.
const icon = readFileSync(join(here, 'app', 'favicon.svg'));
const iconName = 'assets/favicon-' + createHash('sha256').update(icon).digest('hex').slice(0, 8).toUpperCase() + '.svg';
writeFileSync(join(outdir, iconName), icon);
const template = readFileSync(join(here, 'app', 'index.html'), 'utf8');
mkdirSync(outdir, { recursive: true });
writeFileSync(
  join(outdir, 'index.html'),
  template.replace('%STYLE%', '/' + style).replace('%SCRIPT%', '/' + script).replace('%ICON%', '/' + iconName),
);
console.log('web console: ' + ['index.html', ...outputs, iconName].map((f) => basename(f)).join(', '));
