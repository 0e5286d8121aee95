import { strict as assert } from "node:assert";
import { test } from "node:test";

import { RESTART_SETTINGS, initializationOptions, inlineCompletionEnabled, resolveServer } from "../logic/settings";

const installed = (files: string[]) => ({ isExecutable: (file: string) => files.includes(file) });

test("the server path setting wins, with ~ expanded", () => {
  const lookup = { ...installed(["/opt/agent-lsp", "/home/me/bin/agent-lsp", "/usr/bin/agent-lsp"]), path: "/usr/bin", home: "/home/me" };
  assert.deepEqual(resolveServer({ serverPath: "/opt/agent-lsp" }, lookup), { command: "/opt/agent-lsp", args: ["serve"] });
  assert.deepEqual(resolveServer({ serverPath: "~/bin/agent-lsp" }, lookup), { command: "/home/me/bin/agent-lsp", args: ["serve"] });
  assert.deepEqual(resolveServer({ serverPath: "/opt/agent-lsp", serverArgs: ["--workspace", "/w"] }, lookup), {
    command: "/opt/agent-lsp",
    args: ["--workspace", "/w", "serve"],
  });
});

test("without the setting, agent-lsp is found on PATH", () => {
  const lookup = { ...installed(["/b/agent-lsp", "/c/agent-lsp"]), path: "/a::/b:/c" };
  assert.deepEqual(resolveServer({}, lookup), { command: "/b/agent-lsp", args: ["serve"] });
  assert.deepEqual(resolveServer({ serverPath: "  " }, lookup), { command: "/b/agent-lsp", args: ["serve"] });
});

test("a missing binary is a message that says how to install it", () => {
  const missing = resolveServer({}, { ...installed([]), path: "/usr/bin" });
  assert.ok("problem" in missing);
  assert.match(missing.problem, /not on the PATH/);
  assert.match(missing.problem, /cargo install --path agent-lsp/);
  const wrong = resolveServer({ serverPath: "/nope/agent-lsp" }, { ...installed(["/usr/bin/agent-lsp"]), path: "/usr/bin" });
  assert.ok("problem" in wrong);
  assert.match(wrong.problem, /agentLsp.serverPath is `\/nope\/agent-lsp`, which is not an executable file/);
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

test("inline completion is on unless the setting is false", () => {
  const config = (value: unknown) => ({ get: <T>(key: string) => (key === "inlineCompletion.enabled" ? (value as T) : undefined) });
  assert.equal(inlineCompletionEnabled(config(undefined)), true);
  assert.equal(inlineCompletionEnabled(config(true)), true);
  assert.equal(inlineCompletionEnabled(config(false)), false);
});
