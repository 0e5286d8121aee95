// A real ACP client (the official TypeScript SDK's `ClientApp`, @agentclientprotocol/sdk 2.4)
// driving `agent-lsp acp`, for tests/e2e/acp.rs. It starts the agent, runs the steps it is
// given and prints one JSON object with everything it saw, for the Rust test to check.
//
// Usage: node client.mjs NODE_MODULES_DIR REQUEST_JSON
// REQUEST_JSON: {"command", "args", "env", "cwd", "buffers": {path: text},
//                "answers": ["allow-once" | "reject-once" | …], "steps": [step, …]}
// A step: {"do": "new", "mcpServers": […]} | {"do": "prompt", "text" | "repeat"} |
//         {"do": "prompt_and_cancel", "text", "after_ms"} | {"do": "list"} |
//         {"do": "load", "session"} | {"do": "set_mode", "mode"} |
//         {"do": "set_model", "model"} | {"do": "raw", "method", "params"} |
//         {"do": "prompt_during", "text", "during": [step, …]} (steps while the prompt runs)
// The client offers `fs` and answers fs/read_text_file from `buffers` (the editor's unsaved
// text) before the disk; fs/write_text_file is recorded and applied to `buffers`, not the disk.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const [modules, requestText] = process.argv.slice(2);
const request = JSON.parse(requestText);
const acp = await import(
  pathToFileURL(join(modules, "@agentclientprotocol/sdk/dist/v1/stable/acp.js")).href
);

const child = spawn(request.command, request.args, {
  env: request.env,
  stdio: ["pipe", "pipe", "inherit"],
});
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const seen = { initialize: null, steps: [], permissions: [], reads: [], writes: [] };
const buffers = { ...(request.buffers ?? {}) };
const answers = [...(request.answers ?? [])];
// Updates of the step running now, in arrival order.
let updates = [];

const app = new acp.ClientApp()
  .onNotification("session/update", ({ params }) => {
    updates.push(params.update);
  })
  .onRequest("session/request_permission", ({ params }) => {
    const answer = answers.shift() ?? "reject-once";
    // Whether the client was shown the call before the question about it.
    const shownBefore = updates.some(
      (update) => update.sessionUpdate === "tool_call" && update.toolCallId === params.toolCall.toolCallId,
    );
    seen.permissions.push({ toolCall: params.toolCall, options: params.options, answer, shownBefore });
    return { outcome: { outcome: "selected", optionId: answer } };
  })
  .onRequest("fs/read_text_file", ({ params }) => {
    seen.reads.push(params.path);
    if (params.path in buffers) return { content: buffers[params.path] };
    return { content: readFileSync(params.path, "utf8") };
  })
  .onRequest("fs/write_text_file", ({ params }) => {
    seen.writes.push({ path: params.path, content: params.content });
    buffers[params.path] = params.content;
    return {};
  });

const outcome = await app.connectWith(stream, async (ctx) => {
  seen.initialize = await ctx.request("initialize", {
    protocolVersion: 1,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: false },
    clientInfo: { name: "agent-lsp-e2e", version: "1.0.0" },
  });
  let session = null;
  for (const step of request.steps) {
    updates = [];
    const record = { do: step.do };
    const started = performance.now();
    try {
      switch (step.do) {
        case "new": {
          const created = await ctx.request("session/new", {
            cwd: request.cwd,
            mcpServers: step.mcpServers ?? [],
          });
          session = created.sessionId;
          record.response = created;
          break;
        }
        case "prompt": {
          // `repeat`: a prompt of that many bytes, too long for a command line.
          const text = step.repeat ? "x".repeat(step.repeat) : step.text;
          record.response = await ctx.request("session/prompt", {
            sessionId: session,
            prompt: [{ type: "text", text }],
          });
          break;
        }
        case "prompt_and_cancel": {
          const answer = ctx.request("session/prompt", {
            sessionId: session,
            prompt: [{ type: "text", text: step.text }],
          });
          await new Promise((resolve) => setTimeout(resolve, step.after_ms));
          await ctx.notify("session/cancel", { sessionId: session });
          record.response = await answer;
          break;
        }
        case "prompt_during": {
          // The `during` steps run while the prompt is in flight; each records its answer.
          const answer = ctx.request("session/prompt", {
            sessionId: session,
            prompt: [{ type: "text", text: step.text }],
          });
          await new Promise((resolve) => setTimeout(resolve, 300));
          record.during = [];
          for (const inner of step.during) {
            const params =
              inner.do === "set_mode"
                ? ["session/set_mode", { sessionId: session, modeId: inner.mode }]
                : inner.do === "set_model"
                  ? ["session/set_config_option", { sessionId: session, configId: "model", value: inner.model }]
                  : [inner.method, JSON.parse(JSON.stringify(inner.params).replaceAll('"$session"', JSON.stringify(session)))];
            try {
              record.during.push({ response: await ctx.request(...params) });
            } catch (error) {
              record.during.push({ error: { code: error.code, message: error.message } });
            }
          }
          record.response = await answer;
          break;
        }
        case "list":
          record.response = await ctx.request("session/list", { cwd: request.cwd });
          break;
        case "load":
          session = step.session;
          record.response = await ctx.request("session/load", {
            sessionId: step.session,
            cwd: request.cwd,
            mcpServers: [],
          });
          break;
        case "set_mode":
          record.response = await ctx.request("session/set_mode", {
            sessionId: session,
            modeId: step.mode,
          });
          break;
        case "set_model":
          record.response = await ctx.request("session/set_config_option", {
            sessionId: session,
            configId: "model",
            value: step.model,
          });
          break;
        case "raw": {
          // "$session" in the params stands for the session of the steps so far.
          const params = JSON.parse(
            JSON.stringify(step.params ?? {}).replaceAll('"$session"', JSON.stringify(session)),
          );
          record.response = await ctx.request(step.method, params);
          break;
        }
        default:
          throw new Error(`unknown step ${step.do}`);
      }
    } catch (error) {
      record.error = { code: error.code, message: error.message, data: error.data };
    }
    // Notifications sent before a response arrive before it; a short wait lets the ones sent
    // right after it (the commands of a new session) in too.
    await new Promise((resolve) => setTimeout(resolve, 100));
    record.ms = performance.now() - started;
    record.updates = updates;
    record.session = session;
    seen.steps.push(record);
  }
  return seen;
});

child.kill();
seen.buffers = buffers;
process.stdout.write(JSON.stringify(outcome));
