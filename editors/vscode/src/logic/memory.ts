// The memories of `agent.memory.list`, as the quick pick shows them, without `vscode`: one item
// per memory, its id and scope, its text, and where it came from.

/** One memory as `agent.memory.list` gives it. */
export interface Memory {
  id: string;
  scope: "workspace" | "user";
  text: string;
  provenance: { session: string; seq?: number; time?: string };
}

export interface MemoryList {
  memories: Memory[];
}

export interface MemoryItem {
  label: string;
  description: string;
  detail: string;
  id: string;
}

/** Where a memory came from: `session 2026…-ab12 event 17, 2026-12-01T18:06:20Z`, or `editor, …`. */
export function provenanceOf(memory: Memory): string {
  const from = memory.provenance ?? { session: "?" };
  let where = from.seq !== undefined ? `session ${from.session} event ${from.seq}` : from.session;
  if (from.time) {
    where += `, ${from.time}`;
  }
  return where;
}

export function memoryItems(list: MemoryList | null | undefined): MemoryItem[] {
  return (list?.memories ?? []).map((memory) => ({
    label: `${memory.id} (${memory.scope})`,
    description: memory.text.replace(/\s+/g, " ").trim(),
    detail: `from ${provenanceOf(memory)}`,
    id: memory.id,
  }));
}

/** The argument of `agent.memory.remember`, or why the text cannot be one. */
export function rememberArgument(text: string): { text: string } {
  const trimmed = text.trim();
  if (trimmed === "") {
    throw new Error("the memory is empty; say what new sessions should know");
  }
  return { text: trimmed };
}
