import { strict as assert } from "node:assert";
import { test } from "node:test";

import { activityTree, anyRunning } from "../logic/activity";
import { ActivityEntry } from "../logic/protocol";

const entries: ActivityEntry[] = [
  { id: "job-1@100", kind: "job", title: "cargo build", started_ms: 1, detail: "Finished", outcome: "exit 0", cancellable: false },
  { id: "child-1", kind: "subagent", title: "explore: find the parser", started_ms: 2, detail: "step 3", cancellable: true },
  { id: "job-1@200", kind: "job", title: "cargo test", parent: "child-1", started_ms: 3, detail: "running 12 tests", cancellable: true },
  { id: "job-2@300", kind: "job", title: "sleep 30", started_ms: 4, detail: "", outcome: "killed", cancellable: false },
];

test("the activity view lists entries newest first, each under its parent", () => {
  const nodes = activityTree(entries);
  assert.deepEqual(
    nodes.map((node) => [node.label, node.description, node.icon, node.contextValue]),
    [
      ["sleep 30", "killed", "circle-slash", "ended"],
      ["explore: find the parser", "step 3", "hubot", "running-cancellable"],
      ["cargo build", "exit 0 · Finished", "pass", "ended"],
    ],
  );
  assert.deepEqual(
    nodes[1].children.map((node) => [node.id, node.label, node.description, node.icon, node.contextValue]),
    [["job-1@200", "cargo test", "running 12 tests", "terminal", "running-cancellable"]],
  );
  assert.match(nodes[1].children[0].tooltip, /^job job-1@200, started .*, running\ncargo test\nrunning 12 tests$/);
  assert.match(nodes[0].tooltip, /ended: killed/);
});

test("an entry whose parent left the board is listed at the top, a failure has the error icon", () => {
  const nodes = activityTree([
    { id: "job-3@400", kind: "job", title: "make", parent: "gone", started_ms: 5, detail: "error: x", outcome: "exit 2", cancellable: false },
    { id: "job-4@500", kind: "job", title: "tail -f log", started_ms: 6, detail: "", cancellable: false },
  ]);
  assert.deepEqual(
    nodes.map((node) => [node.label, node.icon, node.contextValue]),
    [
      ["tail -f log", "terminal", "running"],
      ["make", "error", "ended"],
    ],
  );
});

test("an empty board says what would show, and polling stops once nothing runs", () => {
  assert.equal(activityTree([])[0].label, "Nothing running");
  assert.equal(activityTree(undefined)[0].contextValue, "none");
  assert.equal(anyRunning(entries), true);
  assert.equal(anyRunning(entries.filter((entry) => entry.outcome !== undefined)), false);
  assert.equal(anyRunning(undefined), false);
});

test("a language server a slow call waits for shows what it does, and a ready end is a success", () => {
  const nodes = activityTree([
    { id: "server:pyright:/w", kind: "server", title: "pyright", started_ms: 1, detail: "Indexing: 12/40 (30%)", cancellable: false },
    { id: "server:clangd:/w", kind: "server", title: "clangd", started_ms: 2, detail: "", outcome: "ready", cancellable: false },
  ]);
  assert.deepEqual(
    nodes.map((node) => [node.label, node.description, node.icon, node.contextValue]),
    [
      ["clangd", "ready", "pass", "ended"],
      ["pyright", "Indexing: 12/40 (30%)", "server-process", "running"],
    ],
  );
  assert.match(nodes[1].tooltip, /^language server server:pyright:\/w, started/);
});
