import { strict as assert } from "node:assert";
import { test } from "node:test";

import { memoryItems, rememberArgument } from "../logic/memory";

test("each memory is an item with its scope, its text on one line and where it came from", () => {
  const items = memoryItems({
    memories: [
      {
        id: "w1",
        scope: "workspace",
        text: "Run make check\nbefore pushing",
        provenance: { session: "20261201-180620-bb05", seq: 17, time: "2026-12-01T18:06:20Z" },
      },
      { id: "u1", scope: "user", text: "Answer briefly", provenance: { session: "editor" } },
    ],
  });
  assert.deepEqual(items, [
    {
      label: "w1 (workspace)",
      description: "Run make check before pushing",
      detail: "from session 20261201-180620-bb05 event 17, 2026-12-01T18:06:20Z",
      id: "w1",
    },
    { label: "u1 (user)", description: "Answer briefly", detail: "from editor", id: "u1" },
  ]);
  assert.deepEqual(memoryItems(null), []);
});

test("an empty memory is refused before it is sent", () => {
  assert.deepEqual(rememberArgument("  Colors live in rich/color.py "), { text: "Colors live in rich/color.py" });
  assert.throws(() => rememberArgument("   "), /the memory is empty/);
});
