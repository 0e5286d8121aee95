// The processes behind the UI test: the loopback model endpoint, code-server with the built
// .vsix installed, and what they say. Every wait is on something the process prints or exits
// with, bounded by a deadline; nothing sleeps.

import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";

export const here = path.dirname(new URL(import.meta.url).pathname);
export const extensionDir = path.resolve(here, "..");
export const repo = path.resolve(extensionDir, "../..");

/** Where the pieces are; each can be overridden for a run by hand. */
export const paths = {
  codeServer: process.env.CODE_SERVER ?? path.join(repo, ".ci/tools/code-server/package/out/node/entry.js"),
  binaries: process.env.AGENT_LSP_BIN_DIR ?? path.join(repo, "target/debug"),
  tools: path.join(repo, ".ci/tools/node_modules/.bin"),
  chromium: process.env.CHROMIUM ?? "/usr/bin/chromium",
  vsix: process.env.AGENT_LSP_VSIX ?? path.join(extensionDir, "agent-lsp.vsix"),
  artifacts: process.env.UI_TEST_ARTIFACTS ?? path.join(repo, "target/test-artifacts/vscode-ui"),
};

/** Fail with what to do when a piece is missing, before starting anything. */
export function checkPieces() {
  const missing = [
    [paths.codeServer, "run `bash .ci/code-server.sh`"],
    [path.join(paths.binaries, "agent-lsp"), "run `cargo build -p agent-lsp`"],
    [path.join(paths.binaries, "model-endpoint"), "run `cargo build -p agent-tests --bin model-endpoint`"],
    [path.join(paths.tools, "pyright-langserver"), "run `bash .ci/tools.sh`"],
    [paths.chromium, "run `bash .ci/tools.sh` (installs Debian's chromium)"],
    [paths.vsix, "run `npm run package` in editors/vscode"],
  ].filter(([file]) => !fs.existsSync(file));
  if (missing.length > 0) {
    throw new Error(`the UI test needs:\n${missing.map(([file, fix]) => `  ${file}: ${fix}`).join("\n")}`);
  }
}

/** Resolve with the first line of `stream` matching `pattern`; reject when `child` exits or at `ms`. */
function firstLine(child, stream, pattern, what, ms) {
  return new Promise((resolve, reject) => {
    let buffered = "";
    const timer = setTimeout(() => reject(new Error(`${what}: nothing matched ${pattern} within ${ms} ms`)), ms);
    const onData = (chunk) => {
      buffered += chunk.toString();
      const match = buffered.match(pattern);
      if (match) {
        clearTimeout(timer);
        stream.off("data", onData);
        resolve(match);
      }
    };
    stream.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited with ${code} before it was ready:\n${buffered}`));
    });
  });
}

/** A child whose output is kept in a log file of the artifacts. */
function started(command, args, options, log) {
  const child = spawn(command, args, { ...options, stdio: ["pipe", "pipe", "pipe"] });
  const file = fs.createWriteStream(log);
  child.stdout.on("data", (chunk) => file.write(chunk));
  child.stderr.on("data", (chunk) => file.write(chunk));
  child.exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  return child;
}

/** The model endpoint serving `script`; its key must come with every request. */
export async function startModelEndpoint(scriptFile, apiKey, log, fimText) {
  const child = started(
    path.join(paths.binaries, "model-endpoint"),
    ["--script", scriptFile, "--api-key", apiKey, "--delta-bytes", "4", "--fim-text", fimText],
    {},
    log,
  );
  const [, baseUrl] = await firstLine(child, child.stdout, /listening on (\S+)/, "model-endpoint", 30_000);
  return { child, baseUrl };
}

/** Close the endpoint's stdin and read its verdict: every reply spent, no request refused. */
export async function stopModelEndpoint(endpoint, log) {
  endpoint.child.stdin.end();
  const { code } = await endpoint.child.exited;
  if (code !== 0) {
    throw new Error(`the model endpoint reports a problem (exit ${code}):\n${fs.readFileSync(log, "utf8")}`);
  }
}

/** `code-server --install-extension` into a fresh extensions folder, touching nothing of the user's. */
export function installExtension({ extensionsDir, userDataDir, configFile, env }) {
  const result = spawnSync(
    process.execPath,
    [paths.codeServer, "--config", configFile, "--user-data-dir", userDataDir, "--extensions-dir", extensionsDir, "--install-extension", paths.vsix],
    { encoding: "utf8", env },
  );
  if (result.status !== 0 || !/was successfully installed/.test(result.stdout)) {
    throw new Error(`installing ${paths.vsix} failed:\n${result.stdout}${result.stderr}`);
  }
}

/** code-server on a free loopback port, with the test's environment; resolves with its URL. */
export async function startCodeServer({ userDataDir, extensionsDir, configFile, env, log }) {
  const child = started(
    process.execPath,
    [
      paths.codeServer,
      "--config", configFile,
      "--auth", "none",
      "--bind-addr", "127.0.0.1:0",
      "--user-data-dir", userDataDir,
      "--extensions-dir", extensionsDir,
      "--disable-telemetry",
      "--disable-update-check",
      "--disable-workspace-trust",
      "--disable-getting-started-override",
      "--ignore-last-opened",
    ],
    // A process group of its own, so that stopping it stops every process it started (the
    // extension host, the file watcher, agent-lsp) and none outlives the test.
    { env, detached: true },
    log,
  );
  const [, url] = await firstLine(child, child.stdout, /HTTP server listening on (http:\/\/\S+?)\/?\s/, "code-server", 60_000);
  return { child, url };
}

/** The agent-lsp processes started by `serve --stdio` (what the extension starts). */
export function serverProcesses() {
  const found = [];
  for (const pid of fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    let argv;
    try {
      argv = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
    } catch {
      continue;
    }
    if (argv.length > 0 && path.basename(argv[0]) === "agent-lsp" && argv.includes("serve")) {
      found.push({ pid: Number(pid), argv });
    }
  }
  return found;
}

export async function stop(child) {
  if (child && child.exitCode === null && child.signalCode === null) {
    try {
      // The whole group when the child leads one (code-server), else the child alone.
      process.kill(-child.pid, "SIGTERM");
    } catch {
      child.kill("SIGTERM");
    }
    await child.exited;
  }
}
