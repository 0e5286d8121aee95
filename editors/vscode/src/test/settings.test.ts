import { strict as assert } from "node:assert";
import { test } from "node:test";

import { RESTART_SETTINGS, initializationOptions, serverCommand } from "../logic/settings";

test("the server is agent-lsp from PATH unless a path is set", () => {
  assert.deepEqual(serverCommand({}), { command: "agent-lsp", args: ["serve"] });
  assert.deepEqual(serverCommand({ serverPath: "  " }), { command: "agent-lsp", args: ["serve"] });
  assert.deepEqual(serverCommand({ serverPath: "/opt/agent-lsp" }), { command: "/opt/agent-lsp", args: ["serve"] });
  assert.deepEqual(serverCommand({ serverPath: "~/bin/agent-lsp" }, "/home/me"), {
    command: "/home/me/bin/agent-lsp",
    args: ["serve"],
  });
  assert.deepEqual(serverCommand({ serverArgs: ["--workspace", "/w"] }), {
    command: "agent-lsp",
    args: ["--workspace", "/w", "serve"],
  });
});

test("initializationOptions are camelCase and leave out empty settings", () => {
  assert.deepEqual(initializationOptions({}, undefined), {});
  assert.deepEqual(
    initializationOptions({ model: "deepseek-v4-flash", baseUrl: " http://127.0.0.1:8080/v1 ", preset: "" }, "sk-1"),
    { model: "deepseek-v4-flash", baseUrl: "http://127.0.0.1:8080/v1", apiKey: "sk-1" },
  );
  assert.deepEqual(initializationOptions({ preset: "readonly" }, "  "), { preset: "readonly" });
});

test("the settings the server reads at initialize restart it", () => {
  assert.ok(RESTART_SETTINGS.includes("agentLsp.model"));
  assert.ok(RESTART_SETTINGS.includes("agentLsp.baseUrl"));
  assert.ok(!RESTART_SETTINGS.some((name) => /apiKey/i.test(name)));
});
