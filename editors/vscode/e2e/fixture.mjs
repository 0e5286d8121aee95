// The UI test's Python workspace and the model's script: what is on disk before VS Code opens
// the folder, and what the loopback endpoint answers, turn by turn.

import * as fs from "node:fs";
import * as path from "node:path";

/** `Fläche` on line 3 comes after non-ASCII text and an emoji (a UTF-16 surrogate pair). */
export const MAIN = `from geo.shapes import Fläche

label = "café ☕ 😀"; eins = Fläche(1.5)
print(label, eins.doppelt().größe)
`;

/** The definition F12 lands on: line 4, column 7 (\`Fläche\` after \`class \`). */
export const SHAPES = `"""Formen für die Tests."""


class Fläche:
    """Eine Fläche mit ihrer Größe."""

    def __init__(self, größe: float) -> None:
        self.größe = größe

    def doppelt(self) -> "Fläche":
        return Fläche(self.größe * 2)
`;

/** A type error pyright reports on line 3; "Fix with agent" changes `"drei"` to `3`. */
export const TYPOS = `from geo.shapes import Fläche

anzahl: int = "drei"
print(Fläche(anzahl))
`;

export const NOTES = "What does @geo/shapes.py define?\n";

/** Where the inline completion check types `zwei = Fläche` (line 3) and takes the ghost text. */
export const INLINE = "from geo.shapes import Fläche\n\n\n";

/** What the endpoint's FIM route answers to every inline completion request. */
export const FIM_TEXT = "(2.0).doppelt()";

export const README = "# Geometrie\n\nSee `geo/shapes.py`.\n";

/** The streamed answer: 196 bytes, 49 chunks of 4 bytes, 50 ms apart. */
export const ANSWER =
  "geo/shapes.py defines one class, Fläche: an area with a size (größe), " +
  "made from a float, and doppelt(), which returns a new Fläche twice as large. " +
  "Nothing else is defined there; main.py uses it.";

export const API_KEY = "sk-ui-test-0815";

/** The plan the model writes with its `todo` tool during "Fix with agent" (left open). */
export const PLAN = [
  { text: "Give anzahl an int", status: "in_progress" },
  { text: "Run the tests", status: "pending" },
];

/** agent-lsp's hooks in the test: a `PreToolUse` hook that refuses `rm -rf`. */
export const HOOKS = `[[hooks.PreToolUse]]
matcher = "shell"
command = "jq -r .tool_input.command | grep -q 'rm -rf' && { echo 'rm -rf is not allowed here' >&2; exit 2; } || true"
`;

/** Write the workspace into `root` (a fresh folder). */
export function writeWorkspace(root) {
  const files = {
    "main.py": MAIN,
    "geo/__init__.py": "",
    "geo/shapes.py": SHAPES,
    "typos.py": TYPOS,
    "notes.agent.md": NOTES,
    "inline.py": INLINE,
    "README.md": README,
    "pyrightconfig.json": JSON.stringify({ typeCheckingMode: "basic" }, null, 2) + "\n",
  };
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    fs.writeFileSync(path.join(root, name), text);
  }
}

/** The replies, in the order the test's turns ask for them. */
export function modelScript() {
  return [
    { expect_user: "What does @geo/shapes.py define?", content: ANSWER, chunk_delay_ms: 50 },
    {
      expect_user: "typos.py",
      tool_calls: [
        { name: "todo", arguments: { items: PLAN } },
        { name: "edit", arguments: { path: "typos.py", old_string: 'anzahl: int = "drei"', new_string: "anzahl: int = 3" } },
        // Refused by the user's PreToolUse hook (HOOKS), whose reason the user is shown.
        { name: "shell", arguments: { command: "rm -rf build" } },
      ],
    },
    { content: "Fixed: `anzahl` is an int, so it is now `3` instead of the string `\"drei\"`." },
  ];
}
