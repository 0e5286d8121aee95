// The plan view's tree from the `plan` of `agent.status`, without `vscode`: the session's goal,
// then the model's `todo` items in order, each with the icon of its status.

import { Plan, PlanItem } from "./protocol";
import { planSummary } from "./status";

export interface PlanNode {
  label: string;
  description: string;
  tooltip: string;
  /** A codicon name: `pass-filled` (done), `sync` (in progress), `circle-large-outline` (pending), `target` (the goal). */
  icon: string;
  children: PlanNode[];
}

const ICONS: Record<PlanItem["status"], string> = {
  done: "pass-filled",
  in_progress: "sync",
  pending: "circle-large-outline",
};

const WORDS: Record<PlanItem["status"], string> = {
  done: "done",
  in_progress: "in progress",
  pending: "pending",
};

/** One line of the goal, at most `width` characters. */
function oneLine(text: string, width = 80): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length <= width ? line : `${line.slice(0, width - 1)}…`;
}

export function planTree(plan: Plan | null | undefined): PlanNode[] {
  if (!plan || (!plan.goal && plan.items.length === 0)) {
    return [
      {
        label: "No plan yet",
        description: "",
        tooltip: "The agent writes its plan with the todo tool; the session's goal is its first prompt.",
        icon: "info",
        children: [],
      },
    ];
  }
  const nodes: PlanNode[] = [];
  if (plan.goal) {
    nodes.push({
      label: "Goal",
      description: oneLine(plan.goal),
      tooltip: `${plan.goal_source === "set" ? "Set with Agent: Set Goal… (or agent-lsp session goal)" : "The session's first prompt"}\n\n${plan.goal}`,
      icon: "target",
      children: [],
    });
  }
  if (plan.items.length > 0) {
    nodes.push({
      label: "Plan",
      description: planSummary(plan),
      tooltip: `${plan.open} of ${plan.items.length} items open`,
      icon: "checklist",
      children: plan.items.map((item) => ({
        label: item.text,
        description: WORDS[item.status],
        tooltip: `${WORDS[item.status]}: ${item.text}`,
        icon: ICONS[item.status],
        children: [],
      })),
    });
  }
  return nodes;
}
