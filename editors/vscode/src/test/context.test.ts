import { strict as assert } from "node:assert";
import { test } from "node:test";

import { contextTree, previewLine, unavailableContext } from "../logic/context";

const sample = {
  segments: [
    { id: 1, role: "system", source: "preset standard", tokens: 1200, preview: "You are a coding agent…", referenced: false },
    { id: 2, role: "user", source: "turn 1 prompt", tokens: 40, preview: "What does\n@src/app.py   do?", referenced: true },
    { id: 3, role: "tool", source: "read src/app.py", tokens: 900, preview: "count = 1", referenced: true },
    { id: 4, role: "user", source: "turn 2 prompt", tokens: 12, preview: "And then?" },
  ],
  totals: { tokens: 2152 },
};

test("segments are grouped by role in the server's order with token sums", () => {
  const tree = contextTree(sample);
  assert.deepEqual(
    tree.map((node) => [node.label, node.description]),
    [
      ["system", "1 · 1.2k tokens"],
      ["user", "2 · 52 tokens"],
      ["tool", "1 · 900 tokens"],
    ],
  );
  const user = tree[1].children;
  assert.deepEqual(user.map((node) => node.label), ["turn 1 prompt", "turn 2 prompt"]);
  assert.equal(user[0].description, "40 · What does @src/app.py do?");
  assert.equal(user[0].referenced, true);
  assert.equal(user[1].referenced, false);
  assert.match(user[0].tooltip, /referenced/);
});

test("an empty or missing view says so", () => {
  assert.equal(contextTree({ segments: [] })[0].label, "The context is empty");
  assert.equal(contextTree(undefined)[0].label, "The context is empty");
  assert.match(unavailableContext()[0].description, /agent\.context\.show/);
});

test("previews are one line, cut with an ellipsis", () => {
  assert.equal(previewLine("a\n  b"), "a b");
  assert.equal(previewLine("x".repeat(10), 5), "xxxx…");
  assert.equal(previewLine(undefined), "");
});
