// The rewind's menus and messages (`agent.rewind.turns`, `agent.rewind`, `agent.rewind.undo`),
// shaped without `vscode` so they are tested in plain Node.

/** One turn as `agent.rewind.turns` lists it. */
export interface RewindTurn {
  turn: number;
  prompt: string;
  /** `[path, how]`: how is `edit`, `write` or `command`. */
  files: [string, string][];
  rewound: boolean;
  rewindable: boolean;
}

/** A path a rewind kept, and why, with the diff forcing it would apply. */
export interface RewindConflict {
  path: string;
  why: string;
  diff: string;
}

/** What `agent.rewind` and `agent.rewind.undo` answer. */
export interface RewindReport {
  rewind_id: string | null;
  turn: number;
  last_turn: number;
  outcome: string;
  plan: [string, string][];
  conflicts: RewindConflict[];
  yours: string[];
  restored: [string, string][];
  context_edit: string | null;
}

/** A quick-pick item for a turn. */
export interface TurnItem {
  label: string;
  description: string;
  detail: string;
  turn: number;
}

/** The turns a rewind can take back, newest first, each with the files it changed. */
export function turnItems(turns: RewindTurn[]): TurnItem[] {
  return turns
    .filter((turn) => turn.rewindable && !turn.rewound)
    .reverse()
    .map((turn) => ({
      label: `Turn ${turn.turn}`,
      description: turn.prompt,
      detail: turn.files.length === 0 ? "no files changed" : turn.files.map(([path, how]) => `${path} (${how})`).join(", "),
      turn: turn.turn,
    }));
}

/** The scopes, as the second quick pick offers them. */
export const SCOPES: { label: string; scope: "files" | "context" | "both" }[] = [
  { label: "Files and Conversation", scope: "both" },
  { label: "Files Only", scope: "files" },
  { label: "Conversation Only", scope: "context" },
];

/** The one-line message after a rewind. */
export function describeRewind(report: RewindReport): string {
  const turns = report.turn === report.last_turn ? `turn ${report.turn}` : `turns ${report.turn}–${report.last_turn}`;
  const restored = report.restored.length === 1 ? "1 file restored" : `${report.restored.length} files restored`;
  const parts = [restored];
  if (report.context_edit) {
    parts.push("conversation taken back");
  }
  if (report.conflicts.length > 0) {
    parts.push(`kept ${report.conflicts.map((conflict) => conflict.path).join(", ")} (changed by you)`);
  }
  return `Rewind of ${turns}: ${parts.join("; ")}`;
}
