import { strict as assert } from "node:assert";
import { test } from "node:test";

import { compactTokens, formatState, formatStatus, shortSession } from "../logic/status";

test("token counts are compact", () => {
  assert.equal(compactTokens(0), "0");
  assert.equal(compactTokens(999), "999");
  assert.equal(compactTokens(1234), "1.2k");
  assert.equal(compactTokens(45678), "46k");
  assert.equal(compactTokens(1234567), "1.23M");
});

test("session ids are shown by their tail", () => {
  assert.equal(shortSession("20261129-101500-ab12"), "ab12");
  assert.equal(shortSession("ab"), "ab");
});

test("the status bar shows session, context tokens and cache share", () => {
  const shown = formatStatus({ session: "20261129-101500-ab12", context_tokens: 12345, cache_hit_share: 0.874 });
  assert.equal(shown.text, "$(hubot) ab12 12k ctx 87% cached");
  assert.match(shown.tooltip, /session 20261129-101500-ab12/);
  assert.match(shown.tooltip, /12345 prompt tokens/);
  assert.match(shown.tooltip, /87% of them/);
});

test("before the first request only the session is shown", () => {
  const shown = formatStatus({ session: "s-0001", context_tokens: null, cache_hit_share: null });
  assert.equal(shown.text, "$(hubot) 0001");
  assert.match(shown.tooltip, /no model request yet/);
});

test("a running turn and a missing status have their own text", () => {
  assert.equal(formatStatus({ session: null, running: true, context_tokens: null, cache_hit_share: null }).text, "$(sync~spin) agent $(close)");
  assert.equal(formatStatus(undefined).text, "$(hubot) agent");
});

test("each server state has its text, click command and label", () => {
  assert.equal(formatState({ kind: "starting" }).label, "agent-lsp starting");
  const ready = formatState({ kind: "ready", status: { session: "s-ab12", context_tokens: null, cache_hit_share: null } });
  assert.equal(ready.text, "$(hubot) ab12");
  assert.equal(ready.command, "agentLsp.showContext");
  assert.match(ready.label, /^agent-lsp ready/);
  // A turn can be cancelled from the item, whether the extension or the server says it runs.
  assert.equal(formatState({ kind: "turn" }).command, "agentLsp.cancel");
  const running = formatState({ kind: "ready", status: { session: "s", running: true, context_tokens: null, cache_hit_share: null } });
  assert.equal(running.command, "agentLsp.cancel");
  assert.match(running.label, /^agent-lsp turn running/);
  const failed = formatState({ kind: "failed", reason: "exited with code 2" });
  assert.equal(failed.command, "agentLsp.showOutput");
  assert.equal(failed.label, "agent-lsp failed: exited with code 2");
  assert.equal(formatState({ kind: "stopped" }).command, "agentLsp.restart");
});
