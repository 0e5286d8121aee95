import { strict as assert } from "node:assert";
import { test } from "node:test";

import { planTree } from "../logic/plan";
import { Plan } from "../logic/protocol";
import { formatStatus, planSummary } from "../logic/status";

const plan: Plan = {
  goal: "Make the parser accept trailing commas.",
  goal_source: "prompt",
  items: [
    { text: "Read the lexer", status: "done" },
    { text: "Fix lex()", status: "in_progress" },
    { text: "Run the tests", status: "pending" },
  ],
  open: 2,
};

test("the plan is summed up as the server says it", () => {
  assert.equal(planSummary(plan), "1/3 done, now: Fix lex()");
  assert.equal(planSummary({ ...plan, items: [{ text: "Ship", status: "pending" }], open: 1 }), "0/1 done, next: Ship");
});

test("the plan view shows the goal, then each item with its status", () => {
  const nodes = planTree(plan);
  assert.deepEqual(
    nodes.map((node) => [node.label, node.description, node.icon]),
    [
      ["Goal", "Make the parser accept trailing commas.", "target"],
      ["Plan", "1/3 done, now: Fix lex()", "checklist"],
    ],
  );
  assert.deepEqual(
    nodes[1].children.map((node) => [node.label, node.description, node.icon]),
    [
      ["Read the lexer", "done", "pass-filled"],
      ["Fix lex()", "in progress", "sync"],
      ["Run the tests", "pending", "circle-large-outline"],
    ],
  );
  assert.match(nodes[0].tooltip, /first prompt/);
  assert.match(planTree({ ...plan, goal_source: "set" })[0].tooltip, /Set Goal/);
  assert.equal(planTree(null)[0].label, "No plan yet");
  assert.equal(planTree({ goal: null, items: [], open: 0 })[0].label, "No plan yet");
});

test("the status bar counts the plan's done items", () => {
  const shown = formatStatus({ session: "s-ab12", context_tokens: 2000, cache_hit_share: 0.5, plan });
  assert.equal(shown.text, "$(hubot) ab12 2.0k ctx 50% cached $(checklist) 1/3");
  assert.match(shown.tooltip, /plan 1\/3 done, now: Fix lex\(\)/);
  // A goal without items adds nothing to the item.
  assert.equal(formatStatus({ session: "s-ab12", context_tokens: null, cache_hit_share: null, plan: { goal: "g", items: [], open: 0 } }).text, "$(hubot) ab12");
});
