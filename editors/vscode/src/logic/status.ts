// The status bar item's text and tooltip from `agent.status`, without `vscode`.

import { Plan, Status } from "./protocol";

/** `12345` → `12.3k`, `1234567` → `1.23M`. */
export function compactTokens(tokens: number): string {
  if (tokens < 1000) {
    return String(tokens);
  }
  if (tokens < 1_000_000) {
    return `${(tokens / 1000).toFixed(tokens < 10_000 ? 1 : 0)}k`;
  }
  return `${(tokens / 1_000_000).toFixed(2)}M`;
}

/** The last four characters of a session id (enough for `agent-lsp session show`). */
export function shortSession(session: string): string {
  return session.length <= 4 ? session : session.slice(-4);
}

/** `2/5 done, now: Fix lex()` (or `next:` the first pending item), as the server says it. */
export function planSummary(plan: Plan): string {
  const done = plan.items.filter((item) => item.status === "done").length;
  let text = `${done}/${plan.items.length} done`;
  const now = plan.items.find((item) => item.status === "in_progress");
  const next = plan.items.find((item) => item.status !== "done");
  if (now) {
    text += `, now: ${now.text}`;
  } else if (next) {
    text += `, next: ${next.text}`;
  }
  return text;
}

export interface StatusText {
  text: string;
  tooltip: string;
}

export function formatStatus(status: Status | null | undefined): StatusText {
  if (!status) {
    return { text: "$(hubot) agent", tooltip: "agent-lsp: no session yet" };
  }
  if (status.running) {
    return { text: "$(sync~spin) agent $(close)", tooltip: "agent-lsp: a turn is running; click to cancel it" };
  }
  const parts = ["$(hubot)"];
  const tooltip: string[] = [];
  if (status.session) {
    parts.push(shortSession(status.session));
    tooltip.push(`session ${status.session}`);
  } else {
    parts.push("agent");
  }
  if (status.context_tokens !== null && status.context_tokens !== undefined) {
    parts.push(`${compactTokens(status.context_tokens)} ctx`);
    tooltip.push(`${status.context_tokens} prompt tokens in the last request`);
  }
  if (status.cache_hit_share !== null && status.cache_hit_share !== undefined) {
    const percent = Math.round(status.cache_hit_share * 100);
    parts.push(`${percent}% cached`);
    tooltip.push(`${percent}% of them served from the provider's prompt cache`);
  }
  if (status.context_tokens === null || status.context_tokens === undefined) {
    tooltip.push("no model request yet");
  }
  const plan = status.plan;
  if (plan && plan.items.length > 0) {
    const done = plan.items.length - plan.open;
    parts.push(`$(checklist) ${done}/${plan.items.length}`);
    tooltip.push(`plan ${planSummary(plan)}`);
  }
  return { text: parts.join(" "), tooltip: `agent-lsp: ${tooltip.join("; ")}` };
}

/** The server as the status bar shows it. */
export type ServerState =
  | { kind: "starting" }
  | { kind: "ready"; status?: Status }
  | { kind: "turn" }
  | { kind: "failed"; reason: string }
  | { kind: "stopped" };

export interface StatusItem extends StatusText {
  /** What a click does: cancel a running turn, show the output of a failed start, ... */
  command: string;
  /** The screen reader's label; it starts with the state's name (`agent-lsp ready`). */
  label: string;
}

/** The status bar item for a state: its text, tooltip, click command and label. */
export function formatState(state: ServerState): StatusItem {
  switch (state.kind) {
    case "starting":
      return {
        text: "$(loading~spin) agent",
        tooltip: "agent-lsp: starting the server (click for its output)",
        command: "agentLsp.showOutput",
        label: "agent-lsp starting",
      };
    case "ready": {
      if (state.status?.running) {
        return formatState({ kind: "turn" });
      }
      const shown = formatStatus(state.status);
      return { ...shown, command: "agentLsp.showContext", label: `agent-lsp ready: ${shown.tooltip}` };
    }
    case "turn":
      return {
        text: "$(sync~spin) agent $(close)",
        tooltip: "agent-lsp: a turn is running; click to cancel it",
        command: "agentLsp.cancel",
        label: "agent-lsp turn running, click to cancel",
      };
    case "failed":
      return {
        text: "$(error) agent",
        tooltip: `agent-lsp failed: ${state.reason} (click for the output)`,
        command: "agentLsp.showOutput",
        label: `agent-lsp failed: ${state.reason}`,
      };
    case "stopped":
      return {
        text: "$(debug-stop) agent",
        tooltip: "agent-lsp: the server is stopped (click to start it)",
        command: "agentLsp.restart",
        label: "agent-lsp stopped",
      };
  }
}
