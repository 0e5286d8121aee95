// The VS Code side of agent-lsp: starts `agent-lsp serve` (through `server.ts`), keeps the API
// key in SecretStorage (passed as `initializationOptions.apiKey`, never written to settings),
// and adds palette commands, the status bar item, the context view, the plan view and the
// activity view (`activity.ts`). The logic worth testing lives in `logic/`, which does not
// import `vscode`.

import * as vscode from "vscode";
import { ExecuteCommandRequest, LanguageClientOptions } from "vscode-languageclient/node";

import { ActivityTreeProvider } from "./activity";
import { ActivityNode } from "./logic/activity";
import { ContextNode, contextTree, unavailableContext } from "./logic/context";
import { PlanNode, planTree } from "./logic/plan";
import { MemoryList, memoryItems, rememberArgument } from "./logic/memory";
import {
  Plan,
  SERVER_COMMANDS,
  Status,
  TURN_COMMANDS,
  TurnResult,
  askArgument,
  Diagnostic,
  describeTurn,
  diagnosticAt,
  fixArgument,
  goalArgument,
  isUnknownCommand,
  selectionArgument,
  sendArgument,
  toolArgument,
} from "./logic/protocol";
import { Settings, RESTART_SETTINGS, inlineCompletionEnabled, initializationOptions } from "./logic/settings";
import { rewindLastTurn, undoRewind } from "./rewind";
import { ServerController } from "./server";

const SECRET_KEY = "agentLsp.apiKey";

let server: ServerController;
let contextView: ContextTreeProvider;
let planView: PlanTreeProvider;
let activityView: ActivityTreeProvider;

/** The running client, if the server started. */
function running() {
  return server?.client;
}

function settings(): Settings {
  const config = vscode.workspace.getConfiguration("agentLsp");
  return {
    serverPath: config.get<string>("serverPath"),
    serverArgs: config.get<string[]>("serverArgs"),
    model: config.get<string>("model"),
    baseUrl: config.get<string>("baseUrl"),
    preset: config.get<string>("preset"),
  };
}

async function startClient(context: vscode.ExtensionContext): Promise<void> {
  const current = settings();
  const apiKey = await context.secrets.get(SECRET_KEY);
  const languages = vscode.workspace.getConfiguration("agentLsp").get<string[]>("languages") ?? [];
  const documentSelector =
    languages.length === 0
      ? [{ scheme: "file" }, { scheme: "untitled", language: "agent-prompt" }]
      : [...languages.map((language) => ({ scheme: "file", language })), { scheme: "file", language: "agent-prompt" }];
  const clientOptions: LanguageClientOptions = {
    documentSelector,
    initializationOptions: initializationOptions(current, apiKey),
    middleware: {
      // Ghost text from the server's `textDocument/inlineCompletion` (vscode-languageclient
      // registers the provider when the server announces it): asked only while
      // agentLsp.inlineCompletion.enabled is on, read at each request so that turning it off
      // takes effect at once, without a restart.
      provideInlineCompletionItems: (document, position, context, token, next) =>
        inlineCompletionEnabled(vscode.workspace.getConfiguration("agentLsp", document))
          ? next(document, position, context, token)
          : undefined,
      // Turns started anywhere (palette, code actions, Ctrl+Enter) show in the status bar,
      // which cancels them on a click, and refresh it when they end.
      executeCommand: async (name, commandArgs, next) => {
        const turn = TURN_COMMANDS.has(name);
        if (turn) {
          server.show({ kind: "turn" });
          // The jobs and sub-agents it starts show up while it runs.
          activityView.poll();
        }
        try {
          return await next(name, commandArgs);
        } finally {
          if (turn) {
            void refreshStatus();
            contextView.refresh();
          }
        }
      },
    },
  };
  if (await server.start({ settings: current, clientOptions })) {
    void refreshStatus();
  }
}

async function stopClient(): Promise<void> {
  await server.stop();
}

/** Send a server command; errors are shown, not thrown. */
async function execute<T>(command: string, argument?: unknown): Promise<T | undefined> {
  const client = running();
  if (!client) {
    void vscode.window.showErrorMessage("agent-lsp is not running (Agent: Restart Server starts it).");
    return undefined;
  }
  try {
    return (await client.sendRequest(ExecuteCommandRequest.type, {
      command,
      arguments: argument === undefined ? [] : [argument],
    })) as T;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    void vscode.window.showErrorMessage(`agent-lsp: ${message}`);
    return undefined;
  }
}

/** A turn command through the client's command path, so the middleware sees it too. */
async function turn(command: string, argument: unknown): Promise<void> {
  if (!running()) {
    void vscode.window.showErrorMessage("agent-lsp is not running (Agent: Restart Server starts it).");
    return;
  }
  try {
    const result = (await vscode.commands.executeCommand(command, argument)) as TurnResult | undefined;
    if (result && result.outcome) {
      void vscode.window.setStatusBarMessage(describeTurn(result), 8000);
    }
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    void vscode.window.showErrorMessage(`agent-lsp: ${message}`);
  }
}

async function refreshStatus(): Promise<void> {
  const client = running();
  if (!client) {
    return;
  }
  try {
    const status = (await client.sendRequest(ExecuteCommandRequest.type, {
      command: SERVER_COMMANDS.status,
      arguments: [],
    })) as Status;
    server.show({ kind: "ready", status });
    planView.show(status.plan);
    activityView.show(status.activity, status.running === true);
  } catch {
    // An older server without agent.status: ready, without figures.
    server.show({ kind: "ready" });
  }
}

function activeEditor(): vscode.TextEditor | undefined {
  const editor = vscode.window.activeTextEditor;
  if (!editor) {
    void vscode.window.showWarningMessage("agent-lsp: no active editor");
  }
  return editor;
}

function range(selection: vscode.Range) {
  return {
    start: { line: selection.start.line, character: selection.start.character },
    end: { line: selection.end.line, character: selection.end.character },
  };
}

/** The LSP form of a VS Code diagnostic (VS Code's severities count from 0 = Error). */
function toProtocolDiagnostic(diagnostic: vscode.Diagnostic): Diagnostic {
  const code = diagnostic.code;
  return {
    range: range(diagnostic.range),
    message: diagnostic.message,
    severity: diagnostic.severity + 1,
    source: diagnostic.source,
    code: typeof code === "object" && code !== null ? code.value : code,
  };
}

class ContextTreeProvider implements vscode.TreeDataProvider<ContextNode> {
  private changed = new vscode.EventEmitter<ContextNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;

  refresh(): void {
    this.changed.fire(undefined);
  }

  getTreeItem(node: ContextNode): vscode.TreeItem {
    const item = new vscode.TreeItem(
      node.label,
      node.children.length > 0 ? vscode.TreeItemCollapsibleState.Collapsed : vscode.TreeItemCollapsibleState.None,
    );
    item.description = node.description;
    item.tooltip = node.tooltip;
    if (node.referenced) {
      item.iconPath = new vscode.ThemeIcon("pass-filled");
    }
    return item;
  }

  async getChildren(node?: ContextNode): Promise<ContextNode[]> {
    if (node) {
      return node.children;
    }
    const client = running();
    if (!client) {
      return [];
    }
    try {
      const view = await client.sendRequest(ExecuteCommandRequest.type, {
        command: SERVER_COMMANDS.contextShow,
        arguments: [{}],
      });
      return contextTree(view);
    } catch (error) {
      if (isUnknownCommand(error)) {
        return unavailableContext();
      }
      return [{ label: "Context unavailable", description: String(error), tooltip: String(error), children: [] }];
    }
  }
}

/** The session's goal and the model's plan, from the last `agent.status`. */
class PlanTreeProvider implements vscode.TreeDataProvider<PlanNode> {
  private changed = new vscode.EventEmitter<PlanNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private plan: Plan | null | undefined;

  show(plan: Plan | null | undefined): void {
    // `null` while a turn runs: keep showing the last plan until the turn's end refreshes it.
    if (plan !== null) {
      this.plan = plan;
      this.changed.fire(undefined);
    }
  }

  getTreeItem(node: PlanNode): vscode.TreeItem {
    const item = new vscode.TreeItem(
      node.label,
      node.children.length > 0 ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.None,
    );
    item.description = node.description;
    item.tooltip = node.tooltip;
    item.iconPath = new vscode.ThemeIcon(node.icon);
    return item;
  }

  getChildren(node?: PlanNode): PlanNode[] {
    return node ? node.children : planTree(this.plan);
  }
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const statusItem = vscode.window.createStatusBarItem("agentLsp.status", vscode.StatusBarAlignment.Right, 100);
  statusItem.name = "agent-lsp";
  context.subscriptions.push(statusItem);
  const output = vscode.window.createOutputChannel("agent-lsp", { log: true });
  context.subscriptions.push(output);
  server = new ServerController(output, statusItem);
  context.subscriptions.push(server);
  contextView = new ContextTreeProvider();
  context.subscriptions.push(vscode.window.registerTreeDataProvider("agentLsp.context", contextView));
  planView = new PlanTreeProvider();
  context.subscriptions.push(vscode.window.registerTreeDataProvider("agentLsp.plan", planView));
  activityView = new ActivityTreeProvider(refreshStatus);
  context.subscriptions.push(activityView);
  context.subscriptions.push(vscode.window.registerTreeDataProvider("agentLsp.activity", activityView));

  const register = (name: string, run: (...args: unknown[]) => unknown) =>
    context.subscriptions.push(vscode.commands.registerCommand(name, run));

  register("agentLsp.ask", async () => {
    const prompt = await vscode.window.showInputBox({ prompt: "Ask the agent", placeHolder: "What does @src/main.rs do?" });
    if (prompt && prompt.trim() !== "") {
      await turn(SERVER_COMMANDS.ask, askArgument(prompt));
    }
  });
  register("agentLsp.askAboutSelection", async () => {
    const editor = activeEditor();
    if (editor) {
      await execute(SERVER_COMMANDS.ask, selectionArgument(editor.document.uri.toString(), range(editor.selection)));
    }
  });
  register("agentLsp.explain", async () => {
    const editor = activeEditor();
    if (editor) {
      await turn(SERVER_COMMANDS.explain, selectionArgument(editor.document.uri.toString(), range(editor.selection)));
    }
  });
  register("agentLsp.send", async () => {
    const editor = activeEditor();
    if (editor) {
      const cursor = editor.selection.active;
      await turn(SERVER_COMMANDS.send, sendArgument(editor.document.uri.toString(), { line: cursor.line, character: cursor.character }));
    }
  });
  register("agentLsp.fix", async () => {
    const editor = activeEditor();
    if (!editor) {
      return;
    }
    const cursor = editor.selection.active;
    const diagnostics = vscode.languages.getDiagnostics(editor.document.uri).map(toProtocolDiagnostic);
    const diagnostic = diagnosticAt(diagnostics, { line: cursor.line, character: cursor.character });
    if (!diagnostic) {
      void vscode.window.showInformationMessage("agent-lsp: no diagnostic under the cursor");
      return;
    }
    await turn(SERVER_COMMANDS.fix, fixArgument(editor.document.uri.toString(), diagnostic));
  });
  register("agentLsp.cancel", async () => {
    const result = await execute<{ cancelled: boolean }>(SERVER_COMMANDS.cancel);
    if (result && !result.cancelled) {
      void vscode.window.setStatusBarMessage("agent-lsp: no turn is running", 4000);
    }
  });
  register("agentLsp.compact", () => turn(SERVER_COMMANDS.compact, undefined));
  register("agentLsp.newSession", async () => {
    const result = await execute<{ session: string }>(SERVER_COMMANDS.sessionNew);
    if (result) {
      void vscode.window.setStatusBarMessage(`agent-lsp: new session ${result.session}`, 4000);
      void refreshStatus();
      contextView.refresh();
    }
  });
  register("agentLsp.approveMcp", async () => {
    // The server asks (a notification with Approve / Not now naming each server).
    const result = await execute<{ approved: boolean; already: boolean; file: string }>(SERVER_COMMANDS.mcpApprove);
    if (result?.already) {
      void vscode.window.showInformationMessage(`agent-lsp: ${result.file} is already approved`);
    } else if (result?.approved) {
      void vscode.window.showInformationMessage(`agent-lsp: approved ${result.file}; its servers join the next session (Agent: New Session)`);
    }
  });
  register("agentLsp.approveHooks", async () => {
    // The server asks (a notification with Approve / Not now naming each hook and its command).
    const result = await execute<{ approved: boolean; files: { file: string }[] }>(SERVER_COMMANDS.hooksApprove);
    if (result?.approved) {
      const files = result.files.map((file) => file.file).join(", ");
      void vscode.window.showInformationMessage(`agent-lsp: approved ${files}; its hooks run from the next session on (Agent: New Session)`);
    }
  });
  register("agentLsp.listSessions", async () => {
    const sessions = await execute<string[]>(SERVER_COMMANDS.sessionList);
    if (sessions) {
      await vscode.window.showQuickPick([...sessions].reverse(), { title: "agent-lsp sessions (newest first)" });
    }
  });
  register("agentLsp.runTool", async () => {
    const name = await vscode.window.showInputBox({ prompt: "Tool name", placeHolder: "lsp_definition" });
    if (!name) {
      return;
    }
    const text = await vscode.window.showInputBox({ prompt: `Arguments of ${name} (JSON object)`, value: "{}" });
    if (text === undefined) {
      return;
    }
    let argument;
    try {
      argument = toolArgument(name, text);
    } catch (error) {
      void vscode.window.showErrorMessage(`agent-lsp: ${error instanceof Error ? error.message : String(error)}`);
      return;
    }
    const result = await execute<{ text: string; is_error: boolean }>(SERVER_COMMANDS.tool, argument);
    // A tool run by hand can start a job (`shell` with `background`): the Agent Activity view
    // learns of it now, whenever it was last refreshed.
    void refreshStatus();
    if (result) {
      const document = await vscode.workspace.openTextDocument({ content: result.text, language: "markdown" });
      await vscode.window.showTextDocument(document, { preview: true });
    }
  });
  register("agentLsp.rewind", () => rewindLastTurn(execute));
  register("agentLsp.rewindUndo", () => undoRewind(execute));
  register("agentLsp.showContext", async () => {
    contextView.refresh();
    await vscode.commands.executeCommand("agentLsp.context.focus");
  });
  register("agentLsp.setGoal", async () => {
    const goal = await vscode.window.showInputBox({
      prompt: "The session's goal (kept verbatim through every compaction)",
      placeHolder: "Make the parser accept trailing commas",
    });
    if (goal === undefined) {
      return;
    }
    let argument;
    try {
      argument = goalArgument(goal);
    } catch (error) {
      void vscode.window.showErrorMessage(`agent-lsp: ${error instanceof Error ? error.message : String(error)}`);
      return;
    }
    if (await execute<{ goal: string }>(SERVER_COMMANDS.goalSet, argument)) {
      void vscode.window.setStatusBarMessage("agent-lsp: goal set", 4000);
      void refreshStatus();
    }
  });
  register("agentLsp.showPlan", async () => {
    await refreshStatus();
    await vscode.commands.executeCommand("agentLsp.plan.focus");
  });
  register("agentLsp.showMemories", async () => {
    const list = await execute<MemoryList>(SERVER_COMMANDS.memoryList);
    if (!list) {
      return;
    }
    const items = memoryItems(list);
    if (items.length === 0) {
      void vscode.window.showInformationMessage("agent-lsp: no memories yet (the agent keeps them with its memory tool, or Agent: Remember…)");
      return;
    }
    const picked = await vscode.window.showQuickPick(items, {
      title: "Memories new sessions get (pick one to forget or edit it)",
      matchOnDescription: true,
      matchOnDetail: true,
    });
    if (!picked) {
      return;
    }
    const action = await vscode.window.showQuickPick(["Edit…", "Forget"], { title: `${picked.label}: ${picked.description}` });
    if (action === "Forget") {
      if (await execute(SERVER_COMMANDS.memoryForget, { id: picked.id })) {
        void vscode.window.setStatusBarMessage(`agent-lsp: forgot ${picked.id}`, 4000);
      }
    } else if (action === "Edit…") {
      const text = await vscode.window.showInputBox({ prompt: `New text of ${picked.id}`, value: picked.description });
      if (text !== undefined && text.trim() !== "" && (await execute(SERVER_COMMANDS.memoryEdit, { id: picked.id, text: text.trim() }))) {
        void vscode.window.setStatusBarMessage(`agent-lsp: changed ${picked.id}`, 4000);
      }
    }
  });
  register("agentLsp.remember", async () => {
    const text = await vscode.window.showInputBox({
      prompt: "A memory for new sessions of this workspace (never a secret: memories are sent with every request)",
      placeHolder: "Tests run with `make check`",
    });
    if (text === undefined) {
      return;
    }
    let argument;
    try {
      argument = rememberArgument(text);
    } catch (error) {
      void vscode.window.showErrorMessage(`agent-lsp: ${error instanceof Error ? error.message : String(error)}`);
      return;
    }
    if (await execute(SERVER_COMMANDS.memoryRemember, argument)) {
      void vscode.window.setStatusBarMessage("agent-lsp: remembered", 4000);
    }
  });
  register("agentLsp.showActivity", async () => {
    await refreshStatus();
    await vscode.commands.executeCommand("agentLsp.activity.focus");
  });
  register("agentLsp.cancelActivity", async (node?: unknown) => {
    const id = (node as ActivityNode | undefined)?.id;
    if (!id) {
      void vscode.window.showInformationMessage("agent-lsp: pick the job or sub-agent to stop in the Agent Activity view");
      return;
    }
    const result = await execute<{ cancelled: boolean }>(SERVER_COMMANDS.activityCancel, { id });
    if (result && !result.cancelled) {
      void vscode.window.setStatusBarMessage(`agent-lsp: ${id} is no longer running`, 4000);
    }
    void refreshStatus();
  });
  register("agentLsp.refreshStatus", () => refreshStatus());
  register("agentLsp.showOutput", () => output.show(true));
  register("agentLsp.setApiKey", async () => {
    const key = await vscode.window.showInputBox({
      prompt: "API key of the model endpoint (kept in VS Code's secret storage)",
      password: true,
      ignoreFocusOut: true,
    });
    if (key && key.trim() !== "") {
      await context.secrets.store(SECRET_KEY, key.trim());
      await stopClient();
      await startClient(context);
      void vscode.window.showInformationMessage("agent-lsp: API key stored; the server was restarted with it.");
    }
  });
  register("agentLsp.clearApiKey", async () => {
    await context.secrets.delete(SECRET_KEY);
    await stopClient();
    await startClient(context);
  });
  register("agentLsp.restart", async () => {
    await stopClient();
    await startClient(context);
  });

  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (RESTART_SETTINGS.some((name) => event.affectsConfiguration(name))) {
        await stopClient();
        await startClient(context);
      }
    }),
  );

  await startClient(context);
}

export async function deactivate(): Promise<void> {
  await stopClient();
}
