// Builds the browser app into dist/: src/main.js and src/style.css bundled with their npm libraries
// (esbuild), and the files of public/ copied beside them. `make install` runs it after `npm ci`.
import { build } from "esbuild";
import { cpSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "dist");

rmSync(dist, { recursive: true, force: true });
mkdirSync(dist, { recursive: true });
cpSync(join(here, "public"), dist, { recursive: true });
// The Bootstrap icons the page shows (src/icons.js), where Shoelace's <sl-icon> fetches them.
const ICONS = ["arrow-clockwise", "clipboard", "hand-thumbs-down", "hand-thumbs-up", "list", "pencil", "trash", "x-lg"];
const iconDir = join(dist, "shoelace", "assets", "icons");
mkdirSync(iconDir, { recursive: true });
for (const name of ICONS) {
  cpSync(join(here, "node_modules/@shoelace-style/shoelace/dist/assets/icons", `${name}.svg`), join(iconDir, `${name}.svg`));
}
await build({
  entryPoints: { app: join(here, "src/main.js"), style: join(here, "src/style.css") },
  outdir: dist,
  bundle: true,
  format: "esm",
  target: ["es2020", "chrome100", "firefox100", "safari15"],
  minify: true,
  sourcemap: true,
  legalComments: "linked",
  logLevel: "warning",
});
