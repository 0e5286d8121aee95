import { strict as assert } from "node:assert";
import { test } from "node:test";

import { LineTail, RestartBudget, errorText, failureMessage } from "../logic/lifecycle";

test("the tail keeps the last non-empty lines", () => {
  const tail = new LineTail(2);
  for (const line of ["one", "", "two  ", "three"]) {
    tail.push(line);
  }
  assert.deepEqual(tail.get(), ["two", "three"]);
  tail.clear();
  assert.deepEqual(tail.get(), []);
});

test("a failed start is explained by the server's stderr, not by the broken pipe", () => {
  const stderr = ["error: unexpected argument '--stdio' found", "", "Usage: agent-lsp serve [OPTIONS]"];
  const message = failureMessage("start", "/usr/bin/agent-lsp serve --stdio", stderr.filter((l) => l !== ""), new Error("write EPIPE"));
  assert.equal(
    message,
    "agent-lsp could not start (`/usr/bin/agent-lsp serve --stdio`): error: unexpected argument '--stdio' found / Usage: agent-lsp serve [OPTIONS]",
  );
  assert.doesNotMatch(message, /EPIPE/);
});

test("without stderr the client's error is the reason", () => {
  assert.equal(failureMessage("stopped", "agent-lsp serve", [], new Error("exit 9")), "agent-lsp stopped (`agent-lsp serve`): exit 9");
  assert.match(failureMessage("start", "agent-lsp serve", []), /its output has the details/);
  assert.equal(errorText({ message: "m" }), "m");
  assert.equal(errorText("plain"), "plain");
});

test("crashes are restarted three times in three minutes, then not", () => {
  const budget = new RestartBudget(3, 180_000);
  assert.ok(budget.allow(0));
  assert.ok(budget.allow(1000));
  assert.ok(budget.allow(2000));
  assert.ok(!budget.allow(3000));
  // Old crashes leave the window.
  assert.ok(budget.allow(400_000));
});
