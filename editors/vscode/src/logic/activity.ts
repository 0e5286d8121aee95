// The activity view's tree from the `activity` of `agent.status`, without `vscode`: the running
// and recently ended background jobs, sub-agents and language servers a slow call waits for, each under the entry it runs under (a
// sub-agent's jobs under the sub-agent), newest first, with its kind's icon, its latest line
// while it runs and its outcome once it ended.

import { ActivityEntry } from "./protocol";

export interface ActivityNode {
  /** The entry's id (what `agent.activity.cancel` takes); empty for the placeholder. */
  id: string;
  label: string;
  description: string;
  tooltip: string;
  /** A codicon name: `terminal` (a running job), `hubot` (a running sub-agent), `pass` / `error` / `circle-slash` (ended). */
  icon: string;
  /** `running-cancellable` gets the inline cancel action; `running` and `ended` do not. */
  contextValue: "running-cancellable" | "running" | "ended" | "none";
  children: ActivityNode[];
}

const KIND_WORDS: Record<ActivityEntry["kind"], string> = { job: "job", subagent: "sub-agent", server: "language server" };
const KIND_ICONS: Record<ActivityEntry["kind"], string> = { job: "terminal", subagent: "hubot", server: "server-process" };

/** Whether an outcome is a success (`exit 0`, a sub-agent's `answered`, a server that is `ready` or `still` working when the call was answered), a stop someone asked for, or a failure. */
function endedIcon(outcome: string): string {
  if (outcome === "exit 0" || outcome === "answered" || outcome === "ready" || outcome.startsWith("still ")) {
    return "pass";
  }
  if (outcome === "killed" || outcome === "cancelled") {
    return "circle-slash";
  }
  return "error";
}

/** Whether any entry still runs (the extension polls `agent.status` while one does). */
export function anyRunning(entries: readonly ActivityEntry[] | null | undefined): boolean {
  return (entries ?? []).some((entry) => entry.outcome === undefined || entry.outcome === null);
}

function node(entry: ActivityEntry, children: ActivityNode[]): ActivityNode {
  const running = entry.outcome === undefined || entry.outcome === null;
  const started = new Date(entry.started_ms).toLocaleTimeString();
  const state = running ? "running" : `ended: ${entry.outcome}`;
  const lines = [`${KIND_WORDS[entry.kind]} ${entry.id}, started ${started}, ${state}`, entry.title];
  if (entry.detail !== "") {
    lines.push(entry.detail);
  }
  return {
    id: entry.id,
    label: entry.title,
    description: running ? entry.detail : `${entry.outcome}${entry.detail !== "" ? ` · ${entry.detail}` : ""}`,
    tooltip: lines.join("\n"),
    icon: running ? KIND_ICONS[entry.kind] : endedIcon(entry.outcome ?? ""),
    contextValue: running ? (entry.cancellable ? "running-cancellable" : "running") : "ended",
    children,
  };
}

export function activityTree(entries: readonly ActivityEntry[] | null | undefined): ActivityNode[] {
  const list = entries ?? [];
  if (list.length === 0) {
    return [
      {
        id: "",
        label: "Nothing running",
        description: "",
        tooltip: "Background jobs the agent starts (shell with background: true) and its sub-agents show here.",
        icon: "info",
        contextValue: "none",
        children: [],
      },
    ];
  }
  const ids = new Set(list.map((entry) => entry.id));
  const build = (parent: string | undefined): ActivityNode[] =>
    list
      .filter((entry) => (parent === undefined ? !entry.parent || !ids.has(entry.parent) : entry.parent === parent))
      // The board lists entries in the order they started; the newest is what one looks for.
      .slice()
      .reverse()
      .map((entry) => node(entry, build(entry.id)));
  return build(undefined);
}
