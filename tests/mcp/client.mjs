// A real MCP client (the official TypeScript SDK's) driving `agent-lsp mcp serve`, for
// tests/e2e/mcp_serve.rs: it connects over stdio (it starts the server) or over streamable
// HTTP (to a server already listening), lists the tools, makes the calls it is given and
// prints one JSON object with everything it saw, for the Rust test to check.
//
// Usage: node client.mjs NODE_MODULES_DIR REQUEST_JSON
// REQUEST_JSON: {"command": …, "args": […], "env": {…}, "calls": [{"name": …, "arguments": {…}}]}
//           or {"url": "http://127.0.0.1:PORT/mcp", "calls": […]}
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules, requestText] = process.argv.slice(2);
const request = JSON.parse(requestText);
const sdk = (path) => import(pathToFileURL(join(modules, "@modelcontextprotocol/sdk/dist/esm", path)).href);
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");

const transport = request.url
  ? new StreamableHTTPClientTransport(new URL(request.url))
  : new StdioClientTransport({
      command: request.command,
      args: request.args,
      env: request.env,
      stderr: "inherit",
    });
const client = new Client({ name: "agent-lsp-e2e", version: "1.0.0" });
await client.connect(transport);

const seen = {
  server: client.getServerVersion(),
  instructions: client.getInstructions(),
  capabilities: client.getServerCapabilities(),
  tools: (await client.listTools()).tools,
  calls: [],
};
// Each call's result, or the JSON-RPC error it got; the calls run one after the other, so a
// call after an error shows the server is still up.
for (const call of request.calls) {
  try {
    seen.calls.push({ result: await client.callTool(call) });
  } catch (error) {
    seen.calls.push({ error: { code: error.code, message: error.message } });
  }
}
await client.close();
process.stdout.write(JSON.stringify(seen) + "\n");
