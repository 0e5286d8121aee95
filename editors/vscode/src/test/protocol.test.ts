import { strict as assert } from "node:assert";
import { test } from "node:test";

import {
  Diagnostic,
  SERVER_COMMANDS,
  TURN_COMMANDS,
  askArgument,
  contains,
  describeTurn,
  diagnosticAt,
  fixArgument,
  goalArgument,
  isUnknownCommand,
  sendArgument,
  toolArgument,
} from "../logic/protocol";

function diagnostic(line: number, start: number, end: number, severity: number, message = "m"): Diagnostic {
  return { range: { start: { line, character: start }, end: { line, character: end } }, message, severity };
}

test("command arguments have the shapes the server reads", () => {
  assert.deepEqual(askArgument("hi"), { prompt: "hi" });
  assert.deepEqual(sendArgument("file:///w/a.agent.md", { line: 3, character: 0 }), {
    uri: "file:///w/a.agent.md",
    position: { line: 3, character: 0 },
  });
  const d = diagnostic(1, 6, 11, 1, '"cuont" is not defined');
  assert.deepEqual(fixArgument("file:///w/app.py", d), { uri: "file:///w/app.py", diagnostic: d });
});

test("every server command id is agent.*, and turns are marked", () => {
  for (const name of Object.values(SERVER_COMMANDS)) {
    assert.match(name, /^agent\./);
  }
  assert.ok(TURN_COMMANDS.has("agent.fix"));
  assert.ok(TURN_COMMANDS.has("agent.send"));
  assert.ok(!TURN_COMMANDS.has("agent.cancel"));
  assert.ok(!TURN_COMMANDS.has("agent.status"));
});

test("tool arguments must be a JSON object", () => {
  assert.deepEqual(toolArgument(" read ", '{"path": "a.py"}'), { name: "read", arguments: { path: "a.py" } });
  assert.deepEqual(toolArgument("read", "  "), { name: "read", arguments: {} });
  assert.throws(() => toolArgument("read", "[1]"), /JSON object/);
  assert.throws(() => toolArgument("read", "{"), SyntaxError);
});

test("a range contains its ends", () => {
  const r = diagnostic(2, 4, 8, 1).range;
  assert.ok(contains(r, { line: 2, character: 4 }));
  assert.ok(contains(r, { line: 2, character: 8 }));
  assert.ok(!contains(r, { line: 2, character: 9 }));
  assert.ok(!contains(r, { line: 1, character: 5 }));
});

test("the diagnostic under the cursor prefers errors, then the narrowest", () => {
  const warning = diagnostic(1, 0, 20, 2, "warning");
  const wideError = diagnostic(1, 0, 20, 1, "wide");
  const narrowError = diagnostic(1, 5, 8, 1, "narrow");
  assert.equal(diagnosticAt([warning, wideError, narrowError], { line: 1, character: 6 })?.message, "narrow");
  assert.equal(diagnosticAt([warning, wideError], { line: 1, character: 6 })?.message, "wide");
  // Not under the cursor but on its line: the nearest.
  const far = diagnostic(4, 30, 32, 1, "far");
  const near = diagnostic(4, 10, 12, 1, "near");
  assert.equal(diagnosticAt([far, near], { line: 4, character: 0 })?.message, "near");
  assert.equal(diagnosticAt([far, near], { line: 5, character: 0 }), undefined);
  assert.equal(diagnosticAt([], { line: 0, character: 0 }), undefined);
});

test("a finished turn is described in one line", () => {
  assert.equal(describeTurn({ outcome: "answered", steps: 1 }), "agent-lsp: answered in 1 step");
  assert.equal(
    describeTurn({ outcome: "answered", steps: 2, changed: ["app.py"] }),
    "agent-lsp: answered in 2 steps; changed app.py",
  );
  assert.match(describeTurn({ outcome: "step_limit", steps: 30 }), /step limit after 30 steps/);
  assert.equal(describeTurn({ outcome: "cancelled", steps: 0 }), "agent-lsp: cancelled after 0 steps");
  assert.equal(describeTurn(undefined), "agent-lsp: done");
  const plan = { goal: "g", items: [{ text: "a", status: "done" as const }, { text: "b", status: "pending" as const }], open: 1 };
  assert.equal(describeTurn({ outcome: "answered", steps: 3, plan }), "agent-lsp: answered in 3 steps; 1 plan item is still open");
  assert.equal(
    describeTurn({ outcome: "cancelled", steps: 1, plan: { ...plan, open: 2 } }),
    "agent-lsp: cancelled after 1 step; 2 plan items are still open",
  );
});

test("the goal argument is trimmed and must not be empty", () => {
  assert.deepEqual(goalArgument("  Ship trailing commas \n"), { goal: "Ship trailing commas" });
  assert.throws(() => goalArgument("   "), /the goal is empty/);
});

test("unknown commands are recognised by code or message", () => {
  assert.ok(isUnknownCommand({ code: -32601, message: "x" }));
  assert.ok(isUnknownCommand({ code: -32603, message: "unknown command `agent.context.show`" }));
  assert.ok(!isUnknownCommand({ code: -32803, message: "a turn is already running" }));
  assert.ok(!isUnknownCommand(null));
  assert.ok(!isUnknownCommand("unknown command"));
});
