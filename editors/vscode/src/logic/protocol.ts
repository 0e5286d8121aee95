// The agent-lsp commands this extension sends, and the shapes of their arguments and answers.
// This module mirrors `agent-lsp/src/server/commands.rs`; it imports nothing from `vscode`, so
// the unit tests run under plain Node.

/** A position as LSP sends it (0-based line, UTF-16 character). */
export interface Position {
  line: number;
  character: number;
}

export interface Range {
  start: Position;
  end: Position;
}

/** The LSP diagnostic fields `agent.fix` reads. */
export interface Diagnostic {
  range: Range;
  message: string;
  severity?: number;
  source?: string;
  code?: string | number | { value: string | number; target?: string };
}

/** The server's commands (`workspace/executeCommand`). */
export const SERVER_COMMANDS = {
  ask: "agent.ask",
  explain: "agent.explain",
  send: "agent.send",
  fix: "agent.fix",
  cancel: "agent.cancel",
  compact: "agent.compact",
  sessionNew: "agent.session.new",
  sessionList: "agent.session.list",
  tool: "agent.tool",
  status: "agent.status",
  contextShow: "agent.context.show",
  contextEdit: "agent.context.edit",
  contextRollback: "agent.context.rollback",
  goalSet: "agent.goal.set",
  memoryList: "agent.memory.list",
  memoryRemember: "agent.memory.remember",
  memoryForget: "agent.memory.forget",
  memoryEdit: "agent.memory.edit",
  activityCancel: "agent.activity.cancel",
  mcpApprove: "agent.mcp.approve",
  hooksApprove: "agent.hooks.approve",
  rewindTurns: "agent.rewind.turns",
  rewind: "agent.rewind",
  rewindUndo: "agent.rewind.undo",
} as const;

/** Commands that run an agent turn: the status bar is refreshed after each of them. */
export const TURN_COMMANDS: ReadonlySet<string> = new Set([
  SERVER_COMMANDS.ask,
  SERVER_COMMANDS.explain,
  SERVER_COMMANDS.send,
  SERVER_COMMANDS.fix,
  SERVER_COMMANDS.compact,
  SERVER_COMMANDS.sessionNew,
]);

/** One item of the model's `todo` plan. */
export interface PlanItem {
  text: string;
  status: "pending" | "in_progress" | "done";
}

/** The session's goal and its current plan, as `agent.status` and turn answers carry them. */
export interface Plan {
  goal: string | null;
  goal_source?: "prompt" | "set" | null;
  items: PlanItem[];
  /** How many items are not done. */
  open: number;
}

/** The answer of a turn command. */
export interface TurnResult {
  outcome?: "answered" | "step_limit" | "cancelled";
  steps?: number;
  text?: string;
  session?: string;
  changed?: string[];
  document?: string | null;
  fixed?: boolean;
  plan?: Plan | null;
}

/** A background job, a sub-agent or a language server a slow `lsp_*` call waits for, on the server's activity board (`activity::Entry`). */
export interface ActivityEntry {
  /** `job-1@4242` for a job, the child session's id for a sub-agent, `server:NAME:ROOT` for a language server. */
  id: string;
  kind: "job" | "subagent" | "server";
  /** The command, or the sub-agent's type and prompt, shortened. */
  title: string;
  /** The entry this one runs under (a sub-agent's job). */
  parent?: string;
  /** Milliseconds since the Unix epoch. */
  started_ms: number;
  /** The latest progress line: a job's last output line, the step a sub-agent is at. */
  detail: string;
  /** Absent while it runs; then how it ended (`exit 3`, `killed`, `answered`, …). */
  outcome?: string;
  cancellable: boolean;
}

/** The answer of `agent.status`. */
export interface Status {
  session: string | null;
  running?: boolean;
  context_tokens: number | null;
  cache_hit_share: number | null;
  /** Absent from servers before plans; `null` while a turn runs. */
  plan?: Plan | null;
  /** The running and recently ended jobs and sub-agents (absent from older servers). */
  activity?: ActivityEntry[];
}

/** One segment of the context window, as `agent.context.show` lists it. */
export interface ContextSegment {
  id: string | number;
  role: string;
  source: string;
  tokens: number;
  preview?: string;
  referenced?: boolean;
}

export interface ContextView {
  segments: ContextSegment[];
  totals?: Record<string, unknown>;
}

export function askArgument(prompt: string): { prompt: string } {
  return { prompt };
}

export function selectionArgument(uri: string, range: Range): { uri: string; range: Range } {
  return { uri, range };
}

export function sendArgument(uri: string, position: Position): { uri: string; position: Position } {
  return { uri, position };
}

export function fixArgument(uri: string, diagnostic: Diagnostic): { uri: string; diagnostic: Diagnostic } {
  return { uri, diagnostic };
}

/** `agent.tool`'s argument from what the user typed: the arguments must be a JSON object. */
export function toolArgument(name: string, argumentsText: string): { name: string; arguments: Record<string, unknown> } {
  const trimmed = argumentsText.trim();
  const parsed: unknown = trimmed === "" ? {} : JSON.parse(trimmed);
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new Error("the tool's arguments must be a JSON object");
  }
  return { name: name.trim(), arguments: parsed as Record<string, unknown> };
}

/** `agent.goal.set`'s argument from what the user typed: the goal must not be empty. */
export function goalArgument(goal: string): { goal: string } {
  const trimmed = goal.trim();
  if (trimmed === "") {
    throw new Error("the goal is empty; say what the session is for");
  }
  return { goal: trimmed };
}

/** Whether `position` lies in `range` (ends inclusive, as editors show a squiggle). */
export function contains(range: Range, position: Position): boolean {
  const before = (a: Position, b: Position) => a.line < b.line || (a.line === b.line && a.character <= b.character);
  return before(range.start, position) && before(position, range.end);
}

/**
 * The diagnostic "under the cursor" for Fix with agent: among those whose range holds the
 * cursor, the most severe (1 = error), then the narrowest; else the nearest one on the cursor's
 * line; else none.
 */
export function diagnosticAt<D extends Diagnostic>(diagnostics: readonly D[], position: Position): D | undefined {
  const severity = (d: Diagnostic) => d.severity ?? 1;
  const width = (d: Diagnostic) =>
    (d.range.end.line - d.range.start.line) * 100000 + (d.range.end.character - d.range.start.character);
  const holding = diagnostics.filter((d) => contains(d.range, position));
  if (holding.length > 0) {
    return [...holding].sort((a, b) => severity(a) - severity(b) || width(a) - width(b))[0];
  }
  const onLine = diagnostics.filter((d) => d.range.start.line <= position.line && position.line <= d.range.end.line);
  const distance = (d: Diagnostic) =>
    Math.min(Math.abs(d.range.start.character - position.character), Math.abs(d.range.end.character - position.character));
  return [...onLine].sort((a, b) => severity(a) - severity(b) || distance(a) - distance(b))[0];
}

/** One line for a finished turn, shown as a notification. */
export function describeTurn(result: TurnResult | null | undefined): string {
  if (!result || !result.outcome) {
    return "agent-lsp: done";
  }
  const steps = result.steps === 1 ? "1 step" : `${result.steps ?? 0} steps`;
  const changed = result.changed && result.changed.length > 0 ? `; changed ${result.changed.join(", ")}` : "";
  const open = result.plan?.open ?? 0;
  const plan = open === 0 ? "" : open === 1 ? "; 1 plan item is still open" : `; ${open} plan items are still open`;
  switch (result.outcome) {
    case "answered":
      return `agent-lsp: answered in ${steps}${changed}${plan}`;
    case "step_limit":
      return `agent-lsp: stopped at the preset's step limit after ${steps}${changed}${plan}; send again to continue`;
    case "cancelled":
      return `agent-lsp: cancelled after ${steps}${changed}${plan}`;
  }
}

/** JSON-RPC's MethodNotFound, which the server answers for a command it does not know. */
export const METHOD_NOT_FOUND = -32601;

/** Whether an error from `workspace/executeCommand` says the server does not know the command. */
export function isUnknownCommand(error: unknown): boolean {
  if (error === null || typeof error !== "object") {
    return false;
  }
  const { code, message } = error as { code?: unknown; message?: unknown };
  return code === METHOD_NOT_FOUND || (typeof message === "string" && /unknown command/i.test(message));
}
