// "Agent: Rewind Last Turn…" and "Agent: Undo Rewind": a quick pick of the turns with the files
// each changed, then files, conversation or both; conflicts (files the user changed too) are
// shown with "Keep My Changes", "Overwrite" and "Show Diff"; the final message offers Undo.
// Open documents change through `workspace/applyEdit`, so a rewind is one undoable edit.

import * as vscode from "vscode";

import { SERVER_COMMANDS } from "./logic/protocol";
import { RewindReport, RewindTurn, SCOPES, describeRewind, turnItems } from "./logic/rewind";

type Execute = <T>(command: string, argument?: unknown) => Promise<T | undefined>;

async function showDiffs(report: RewindReport): Promise<void> {
  const text = report.conflicts.map((conflict) => `# ${conflict.path}: ${conflict.why}\n${conflict.diff}`).join("\n");
  const document = await vscode.workspace.openTextDocument({ content: text, language: "diff" });
  await vscode.window.showTextDocument(document, { preview: true });
}

async function finished(execute: Execute, report: RewindReport | undefined): Promise<void> {
  if (!report) {
    return;
  }
  const undo = await vscode.window.showInformationMessage(`agent-lsp: ${describeRewind(report)}`, "Undo");
  if (undo === "Undo") {
    await undoRewind(execute);
  }
}

export async function undoRewind(execute: Execute): Promise<void> {
  const report = await execute<RewindReport>(SERVER_COMMANDS.rewindUndo);
  if (report) {
    void vscode.window.showInformationMessage(`agent-lsp: undone: ${describeRewind(report)}`);
  }
}

export async function rewindLastTurn(execute: Execute): Promise<void> {
  const listed = await execute<{ turns: RewindTurn[] }>(SERVER_COMMANDS.rewindTurns);
  if (!listed) {
    return;
  }
  const items = turnItems(listed.turns);
  if (items.length === 0) {
    void vscode.window.showInformationMessage("agent-lsp: no turn of this session can be taken back");
    return;
  }
  const picked = await vscode.window.showQuickPick(items, {
    title: "Rewind to before which turn? (it and every later turn are taken back)",
    matchOnDescription: true,
    matchOnDetail: true,
  });
  if (!picked) {
    return;
  }
  const scope = await vscode.window.showQuickPick(SCOPES, { title: `Take back turn ${picked.turn}: what?` });
  if (!scope) {
    return;
  }
  const argument = { turn: picked.turn, scope: scope.scope };
  const plan = await execute<RewindReport>(SERVER_COMMANDS.rewind, { ...argument, dryRun: true });
  if (!plan) {
    return;
  }
  let force = false;
  while (plan.conflicts.length > 0) {
    const names = plan.conflicts.map((conflict) => `${conflict.path} (${conflict.why})`).join(", ");
    const choice = await vscode.window.showWarningMessage(
      `agent-lsp: you changed ${names} after the turn.`,
      { modal: true },
      "Keep My Changes",
      "Overwrite",
      "Show Diff",
    );
    if (choice === "Show Diff") {
      await showDiffs(plan);
      continue;
    }
    if (choice === undefined) {
      return;
    }
    force = choice === "Overwrite";
    break;
  }
  await finished(execute, await execute<RewindReport>(SERVER_COMMANDS.rewind, { ...argument, force }));
}
