// The agent-lsp server's lifecycle in VS Code: find the binary, start it with
// vscode-languageclient over stdio (the client appends `--stdio`, which `agent-lsp serve`
// accepts, as Node-based servers do), keep the status bar item on its real state, and show each
// failure once, with the server's own reason from stderr and a button to its output.

import * as readline from "readline";
import * as vscode from "vscode";
import {
  CloseAction,
  ErrorAction,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
  TransportKind,
} from "vscode-languageclient/node";

import { LineTail, RestartBudget, failureMessage } from "./logic/lifecycle";
import { ServerState, formatState } from "./logic/status";
import { resolveServer, Settings } from "./logic/settings";

/**
 * A LanguageClient whose lifecycle errors go to the output only. On its own it shows a
 * notification per failed start, per retry and per closed connection, and the first of those
 * is a broken pipe rather than the reason; the controller shows one notification instead.
 * Failed requests keep the client's own notification.
 */
class AgentClient extends LanguageClient {
  override error(message: string, data?: unknown, showNotification: boolean | "force" = true): void {
    super.error(message, data, message.startsWith("Request ") ? showNotification : false);
  }
}

export interface StartOptions {
  settings: Settings;
  clientOptions: LanguageClientOptions;
}

export class ServerController implements vscode.Disposable {
  client: LanguageClient | undefined;
  private state: ServerState = { kind: "starting" };
  private readonly stderr = new LineTail();
  private readonly crashes = new RestartBudget();
  /** Set once this start's failure was reported, so that it is reported once. */
  private reported = false;
  private commandLine = "agent-lsp serve";
  /** Resolved when the running server's stderr has ended (its process exited). */
  private stderrEnded: Promise<void> = Promise.resolve();

  constructor(
    readonly output: vscode.LogOutputChannel,
    private readonly item: vscode.StatusBarItem,
  ) {
    this.show({ kind: "starting" });
  }

  get current(): ServerState {
    return this.state;
  }

  /** Show `state` in the status bar item (a turn that ends goes back to ready). */
  show(state: ServerState): void {
    this.state = state;
    const shown = formatState(state);
    this.item.text = shown.text;
    this.item.tooltip = shown.tooltip;
    this.item.command = shown.command;
    this.item.accessibilityInformation = { label: shown.label };
    this.item.show();
  }

  async start({ settings, clientOptions }: StartOptions): Promise<boolean> {
    this.reported = false;
    this.stderr.clear();
    this.show({ kind: "starting" });
    const server = resolveServer(settings);
    if ("problem" in server) {
      this.output.error(server.problem);
      this.fail(server.problem, server.problem, ["Open Settings"]);
      return false;
    }
    this.commandLine = [server.command, ...server.args, "--stdio"].join(" ");
    this.output.info(`starting ${this.commandLine}`);
    const serverOptions: ServerOptions = { command: server.command, args: server.args, transport: TransportKind.stdio };
    const client = new AgentClient("agentLsp", "agent-lsp", serverOptions, {
      ...clientOptions,
      outputChannel: this.output,
      stdioOptions: {
        stdout: (input, channel) => this.lines(input, (line) => channel.info(line)),
        stderr: (input, channel) => {
          this.stderrEnded = new Promise((resolve) => input.once("close", resolve));
          this.lines(input, (line) => {
            this.stderr.push(line);
            channel.error(line);
          });
        },
      },
      initializationFailedHandler: () => false,
      errorHandler: {
        error: (_error, _message, count) => ({
          action: (count ?? 0) <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown,
          handled: true,
        }),
        closed: () => this.closed(),
      },
    });
    this.client = client;
    client.onDidChangeState((event) => {
      if (event.newState === State.Running) {
        this.show({ kind: "ready" });
      }
    });
    try {
      await client.start();
    } catch (error) {
      if (this.client === client) {
        this.client = undefined;
      }
      await this.stderrSettled();
      const message = failureMessage("start", this.commandLine, this.stderr.get(), error);
      this.fail(message, message, ["Show Output"]);
      return false;
    }
    return true;
  }

  async stop(): Promise<void> {
    const running = this.client;
    this.client = undefined;
    if (running) {
      // A stop asked for is no failure.
      this.reported = true;
      await running.stop().catch((error) => this.output.warn(`stopping the server: ${String(error)}`));
    }
    this.show({ kind: "stopped" });
  }

  dispose(): void {
    void this.stop();
  }

  /** The connection closed without a stop: restart a server that was running, a few times. */
  private async closed() {
    const wasRunning = this.state.kind === "ready" || this.state.kind === "turn";
    if (wasRunning && this.crashes.allow(Date.now())) {
      this.output.warn("the server stopped; restarting it");
      this.stderr.clear();
      this.show({ kind: "starting" });
      return { action: CloseAction.Restart, handled: true };
    }
    if (wasRunning) {
      await this.stderrSettled();
      const message = failureMessage("stopped", this.commandLine, this.stderr.get());
      this.fail(message, `${message} It stopped too often to restart it again.`, ["Show Output", "Restart"]);
    }
    // A server that never ran is reported by `start`, once its promise rejects.
    return { action: CloseAction.DoNotRestart, handled: true };
  }

  /** Show the failure in the status bar, and once in a notification with its buttons. */
  private fail(reason: string, notification: string, buttons: string[]): void {
    this.show({ kind: "failed", reason });
    if (this.reported) {
      return;
    }
    this.reported = true;
    void vscode.window.showErrorMessage(notification, ...buttons).then((choice) => {
      if (choice === "Show Output") {
        this.output.show(true);
      } else if (choice === "Open Settings") {
        void vscode.commands.executeCommand("workbench.action.openSettings", "agentLsp.serverPath");
      } else if (choice === "Restart") {
        this.crashes.reset();
        void vscode.commands.executeCommand("agentLsp.restart");
      }
    });
  }

  /** Wait for the exited server's last stderr lines, but not for a process that never ran. */
  private async stderrSettled(): Promise<void> {
    await Promise.race([this.stderrEnded, new Promise((resolve) => setTimeout(resolve, 2000))]);
  }

  private lines(input: NodeJS.ReadableStream, each: (line: string) => void): void {
    readline
      .createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 })
      .on("line", each);
  }
}
