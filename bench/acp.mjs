// What `agent-lsp acp` adds to a turn's latency, against `agent-lsp run` in one run, with the
// loopback model answering at once (tests/src/bin/model_endpoint.rs):
//
// - acp, cold: the agent started, `initialize` and `session/new` answered (a usable session),
//   then `session/prompt` sent until its first `agent_message_chunk`;
// - acp, warm: a second prompt in that session until its first chunk;
// - run: `agent-lsp run "…"` started until the answer's first byte on stdout.
//
// Usage (after `cargo build --workspace --tests`, from the repository root):
//   node bench/acp.mjs [RUNS]      (default 15; BENCH_CONFIG=FILE for a config file,
//                                   BENCH_WORKSPACE=DIR for a workspace of your own,
//                                   BENCH_PAUSE_MS=N to wait that long before the first prompt)
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const runs = Number(process.argv[2] ?? 15);
const root = resolve(import.meta.dirname, "..");
const bin = (name) => join(root, "target/debug", name);
const acp = await import(
  pathToFileURL(join(root, ".ci/tools/node_modules/@agentclientprotocol/sdk/dist/v1/stable/acp.js")).href
);

const state = mkdtempSync(join(tmpdir(), "acp-bench-state-"));
// BENCH_WORKSPACE: a real tree (the Linux sources) instead of a one-file folder.
const workspace = process.env.BENCH_WORKSPACE ?? mkdtempSync(join(tmpdir(), "acp-bench-ws-"));
if (!process.env.BENCH_WORKSPACE) writeFileSync(join(workspace, "README.md"), "bench\n");
const script = join(state, "script.json");
writeFileSync(script, JSON.stringify(Array.from({ length: runs * 3 + 5 }, () => ({ content: "ok" }))));
const endpoint = spawn(bin("model-endpoint"), ["--script", script], { stdio: ["pipe", "pipe", "ignore"] });
const baseUrl = await new Promise((done) => {
  endpoint.stdout.once("data", (line) => done(String(line).trim().replace("listening on ", "")));
});
const env = {
  ...process.env,
  HOME: state,
  AGENT_LSP_STATE_DIR: state,
  AGENT_LSP_CONFIG: process.env.BENCH_CONFIG ?? join(state, "none.toml"),
};

async function acpOnce() {
  const started = performance.now();
  const child = spawn(bin("agent-lsp"), ["acp", "--base-url", baseUrl], {
    env,
    stdio: ["pipe", "pipe", "ignore"],
  });
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  let firstChunk = null;
  const app = new acp.ClientApp().onNotification("session/update", ({ params }) => {
    if (params.update.sessionUpdate === "agent_message_chunk" && firstChunk) {
      firstChunk(performance.now());
      firstChunk = null;
    }
  });
  const figures = await app.connectWith(stream, async (ctx) => {
    await ctx.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
    const { sessionId } = await ctx.request("session/new", { cwd: workspace, mcpServers: [] });
    const usable = performance.now() - started;
    // BENCH_PAUSE_MS: the time a person takes to type the first prompt.
    await new Promise((done) => setTimeout(done, Number(process.env.BENCH_PAUSE_MS ?? 0)));
    const prompt = async () => {
      const sent = performance.now();
      const chunk = new Promise((done) => (firstChunk = done));
      const answered = ctx.request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: "hi" }],
      });
      const at = await chunk;
      await answered;
      return at - sent;
    };
    const cold = await prompt();
    const warm = await prompt();
    return { usable, cold, warm, total: usable + cold };
  });
  child.kill();
  return figures;
}

function runOnce() {
  return new Promise((done) => {
    const started = performance.now();
    const child = spawn(bin("agent-lsp"), ["--workspace", workspace, "run", "--base-url", baseUrl, "hi"], {
      env,
      stdio: ["ignore", "pipe", "ignore"],
    });
    let first = null;
    child.stdout.on("data", () => {
      first ??= performance.now() - started;
    });
    child.on("close", () => done(first));
  });
}

const stats = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const f = (v) => v.toFixed(1);
  return `min ${f(sorted[0])}  median ${f(sorted[Math.floor(sorted.length / 2)])}  max ${f(sorted.at(-1))} ms`;
};

const acpFigures = [];
const runFigures = [];
for (let i = 0; i < runs; i++) {
  acpFigures.push(await acpOnce());
  runFigures.push(await runOnce());
}
console.log(`runs: ${runs}, alternating`);
console.log(`acp: initialize → usable session      ${stats(acpFigures.map((f) => f.usable))}`);
console.log(`acp: session/prompt → first chunk     ${stats(acpFigures.map((f) => f.cold))}`);
console.log(`acp: second prompt → first chunk      ${stats(acpFigures.map((f) => f.warm))}`);
console.log(`acp: start → first chunk (cold total) ${stats(acpFigures.map((f) => f.total))}`);
console.log(`run: start → first byte of the answer ${stats(runFigures)}`);
endpoint.stdin.end();
