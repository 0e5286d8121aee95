// The "Agent Activity" view: the server's running and recently ended background jobs and
// sub-agents (the `activity` of `agent.status`, shaped by `logic/activity.ts`), with an inline
// action that stops a running one (`agent.activity.cancel`). VS Code shows each entry's
// `$/progress` on its own; this view is where they all are at once, after they ended too.
// It is fed by every `agent.status` the extension asks for, and asks again every second while
// a turn or an entry runs (jobs start and end during turns, whose answer comes only at the end).

import * as vscode from "vscode";

import { ActivityNode, activityTree, anyRunning } from "./logic/activity";
import { ActivityEntry } from "./logic/protocol";

/** How often `agent.status` is asked for while something runs. */
const POLL_MS = 1000;

export class ActivityTreeProvider implements vscode.TreeDataProvider<ActivityNode> {
  private changed = new vscode.EventEmitter<ActivityNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private entries: ActivityEntry[] | undefined;
  private timer: NodeJS.Timeout | undefined;

  /** `refresh` asks the server for a new status (and so calls `show` again). */
  constructor(private readonly refresh: () => Promise<void>) {}

  /** Show the board of an `agent.status` answer; keep asking while `turnRunning` or an entry runs. */
  show(entries: ActivityEntry[] | undefined, turnRunning: boolean): void {
    this.entries = entries;
    this.changed.fire(undefined);
    if (turnRunning || anyRunning(entries)) {
      this.poll();
    }
  }

  /** Ask again in a second (once: a poll already waiting is the one). */
  poll(): void {
    if (this.timer === undefined) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        void this.refresh();
      }, POLL_MS);
    }
  }

  dispose(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
    }
  }

  getTreeItem(node: ActivityNode): vscode.TreeItem {
    const item = new vscode.TreeItem(
      node.label,
      node.children.length > 0 ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.None,
    );
    item.id = node.id === "" ? undefined : node.id;
    item.description = node.description;
    item.tooltip = node.tooltip;
    item.iconPath = new vscode.ThemeIcon(node.icon);
    item.contextValue = node.contextValue;
    return item;
  }

  getChildren(node?: ActivityNode): ActivityNode[] {
    return node ? node.children : activityTree(this.entries);
  }
}
