// Bundle the extension and its one runtime dependency (vscode-languageclient) into
// dist/extension.js, so that the .vsix carries one file instead of node_modules.
// `node esbuild.mjs --production` minifies and leaves out the source map (what `vsce package`
// ships); without it the bundle is readable, with a map, for debugging.
import * as esbuild from "esbuild";

const production = process.argv.includes("--production");

await esbuild.build({
  entryPoints: ["src/extension.ts"],
  bundle: true,
  outfile: "dist/extension.js",
  // Provided by VS Code at run time.
  external: ["vscode"],
  format: "cjs",
  platform: "node",
  target: "node20",
  minify: production,
  sourcemap: !production,
  logLevel: "warning",
});
