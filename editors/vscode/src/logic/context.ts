// The context view's tree from `agent.context.show`, without `vscode`: segments grouped by
// role, in the server's order, with token counts.

import { ContextSegment, ContextView } from "./protocol";
import { compactTokens } from "./status";

export interface ContextNode {
  label: string;
  description: string;
  tooltip: string;
  /** Whether the segment was referenced by the model (shown with a different icon). */
  referenced?: boolean;
  children: ContextNode[];
}

/** One line of preview text, at most `width` characters. */
export function previewLine(preview: string | undefined, width = 80): string {
  const line = (preview ?? "").replace(/\s+/g, " ").trim();
  return line.length <= width ? line : `${line.slice(0, width - 1)}…`;
}

export function contextTree(view: ContextView | null | undefined): ContextNode[] {
  if (!view || !Array.isArray(view.segments) || view.segments.length === 0) {
    return [{ label: "The context is empty", description: "", tooltip: "No segments yet: ask the agent something first.", children: [] }];
  }
  const groups = new Map<string, ContextSegment[]>();
  for (const segment of view.segments) {
    const role = segment.role || "other";
    const group = groups.get(role) ?? [];
    group.push(segment);
    groups.set(role, group);
  }
  const nodes: ContextNode[] = [];
  for (const [role, segments] of groups) {
    const tokens = segments.reduce((sum, segment) => sum + (segment.tokens || 0), 0);
    nodes.push({
      label: role,
      description: `${segments.length} · ${compactTokens(tokens)} tokens`,
      tooltip: `${segments.length} segments, ${tokens} tokens`,
      children: segments.map((segment) => ({
        label: segment.source || String(segment.id),
        description: `${compactTokens(segment.tokens || 0)} · ${previewLine(segment.preview, 60)}`,
        tooltip: `${segment.source} (${segment.tokens} tokens)${segment.referenced ? ", referenced" : ""}\n\n${segment.preview ?? ""}`,
        referenced: segment.referenced === true,
        children: [],
      })),
    });
  }
  return nodes;
}

/** The node shown when the server has no context command. */
export function unavailableContext(): ContextNode[] {
  return [
    {
      label: "Context view unavailable",
      description: "agent.context.show is unknown to this agent-lsp",
      tooltip: "This agent-lsp does not offer agent.context.show yet: update agent-lsp.",
      children: [],
    },
  ];
}
