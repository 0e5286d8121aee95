// The ACP TypeScript SDK's 1.x client (`ClientSideConnection`, @agentclientprotocol/sdk 1.9,
// installed as `acp-sdk-v1`), which plugins written before the SDK's 2.0 still use, driving
// `agent-lsp acp` for tests/e2e/acp.rs: initialize, a session, a turn whose call asks for
// permission and writes through the client, a cancelled turn, then the session closed, listed
// and resumed. Prints one JSON object with everything it saw.
//
// Usage: node client_v1.mjs NODE_MODULES_DIR REQUEST_JSON
// REQUEST_JSON: {"command", "args", "env", "cwd", "buffers": {path: text}}
import { spawn } from "node:child_process";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const [modules, requestText] = process.argv.slice(2);
const request = JSON.parse(requestText);
const acp = await import(pathToFileURL(join(modules, "acp-sdk-v1/dist/acp.js")).href);

const child = spawn(request.command, request.args, {
  env: request.env,
  stdio: ["pipe", "pipe", "inherit"],
});
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const buffers = { ...(request.buffers ?? {}) };
const seen = { updates: [], permissions: [], writes: [] };

const connection = new acp.ClientSideConnection(
  () => ({
    async requestPermission(params) {
      seen.permissions.push(params.toolCall.title);
      return { outcome: { outcome: "selected", optionId: "allow-once" } };
    },
    async sessionUpdate(params) {
      seen.updates.push(params.update);
    },
    async readTextFile(params) {
      if (params.path in buffers) return { content: buffers[params.path] };
      throw acp.RequestError.resourceNotFound(params.path);
    },
    async writeTextFile(params) {
      seen.writes.push({ path: params.path, content: params.content });
      buffers[params.path] = params.content;
      return {};
    },
  }),
  stream,
);

seen.initialize = await connection.initialize({
  protocolVersion: acp.PROTOCOL_VERSION,
  clientCapabilities: { fs: { readTextFile: true, writeTextFile: true } },
});
const { sessionId } = await connection.newSession({ cwd: request.cwd, mcpServers: [] });
seen.first = await connection.prompt({
  sessionId,
  prompt: [{ type: "text", text: "write the notes" }],
});
const slow = connection.prompt({ sessionId, prompt: [{ type: "text", text: "take your time" }] });
await new Promise((resolve) => setTimeout(resolve, 500));
await connection.cancel({ sessionId });
seen.cancelled = await slow;
await connection.closeSession({ sessionId });
seen.listed = await connection.listSessions({ cwd: request.cwd });
seen.resumed = await connection.resumeSession({ sessionId, cwd: request.cwd, mcpServers: [] });
seen.sessionId = sessionId;
child.kill();
process.stdout.write(JSON.stringify(seen));
