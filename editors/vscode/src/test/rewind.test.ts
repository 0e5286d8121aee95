import { strict as assert } from "node:assert";
import { test } from "node:test";

import { RewindReport, describeRewind, turnItems } from "../logic/rewind";

test("the turns menu lists rewindable turns newest first with what each changed", () => {
  const items = turnItems([
    { turn: 1, prompt: "Send", files: [], rewound: false, rewindable: true },
    { turn: 2, prompt: "Fix the typo", files: [["typos.py", "edit"], ["out.txt", "command"]], rewound: false, rewindable: true },
    { turn: 3, prompt: "Old", files: [], rewound: true, rewindable: true },
  ]);
  assert.deepEqual(
    items.map((item) => [item.label, item.detail]),
    [
      ["Turn 2", "typos.py (edit), out.txt (command)"],
      ["Turn 1", "no files changed"],
    ],
  );
});

test("the message after a rewind names what was restored and what was kept", () => {
  const report: RewindReport = {
    rewind_id: "rewind-9",
    turn: 2,
    last_turn: 3,
    outcome: "partial",
    plan: [["a.py", "restore"]],
    conflicts: [{ path: "b.py", why: "unsaved changes in the editor", diff: "" }],
    yours: [],
    restored: [["a.py", "editor"]],
    context_edit: "edit-12",
  };
  assert.equal(describeRewind(report), "Rewind of turns 2–3: 1 file restored; conversation taken back; kept b.py (changed by you)");
});
