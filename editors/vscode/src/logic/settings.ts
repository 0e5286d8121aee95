// The server's command line and `initializationOptions` from the extension's settings, without
// `vscode`.

import * as fs from "fs";
import * as os from "os";
import * as path from "path";

export interface Settings {
  serverPath?: string;
  serverArgs?: string[];
  model?: string;
  baseUrl?: string;
  preset?: string;
}

export interface ServerCommand {
  command: string;
  args: string[];
}

/** How to get the binary, for the message shown when none is found. */
export const INSTALL_HINT =
  "Install it with `cargo install --path agent-lsp` from a checkout of the agent-lsp repository (it lands in ~/.cargo/bin), " +
  "or set agentLsp.serverPath to the binary's full path.";

/** Where to look, injectable for the tests. */
export interface Lookup {
  home?: string;
  /** The `PATH` the extension host was started with. */
  path?: string;
  isExecutable?: (file: string) => boolean;
}

function isExecutableFile(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * The server to start: `agentLsp.serverPath` (with `~` expanded) when set, else `agent-lsp` from
 * `PATH`; always `serve`. When neither gives an executable file, the reason and how to install
 * it, so that the user never sees a spawn error instead. (vscode-languageclient appends
 * `--stdio` to the arguments; `agent-lsp serve` accepts it.)
 */
export function resolveServer(settings: Settings, lookup: Lookup = {}): ServerCommand | { problem: string } {
  const home = lookup.home ?? os.homedir();
  const isExecutable = lookup.isExecutable ?? isExecutableFile;
  const args = [...(settings.serverArgs ?? []), "serve"];
  let configured = (settings.serverPath ?? "").trim();
  if (configured !== "") {
    if (configured === "~" || configured.startsWith("~/")) {
      configured = path.join(home, configured.slice(1));
    }
    if (!isExecutable(configured)) {
      return { problem: `agentLsp.serverPath is \`${configured}\`, which is not an executable file. ${INSTALL_HINT}` };
    }
    return { command: configured, args };
  }
  const searchPath = lookup.path ?? process.env.PATH ?? "";
  for (const directory of searchPath.split(path.delimiter)) {
    if (directory === "") {
      continue;
    }
    const candidate = path.join(directory, "agent-lsp");
    if (isExecutable(candidate)) {
      return { command: candidate, args };
    }
  }
  return { problem: `agent-lsp is not on the PATH VS Code was started with. ${INSTALL_HINT}` };
}

/** What the server reads from `initializationOptions` (camelCase); empty settings are left out. */
export interface InitializationOptions {
  model?: string;
  baseUrl?: string;
  apiKey?: string;
  preset?: string;
}

export function initializationOptions(settings: Settings, apiKey: string | undefined): InitializationOptions {
  const options: InitializationOptions = {};
  const set = (key: keyof InitializationOptions, value: string | undefined) => {
    const trimmed = (value ?? "").trim();
    if (trimmed !== "") {
      options[key] = trimmed;
    }
  };
  set("model", settings.model);
  set("baseUrl", settings.baseUrl);
  set("preset", settings.preset);
  set("apiKey", apiKey);
  return options;
}

/** Settings whose change needs the server restarted (it reads them at `initialize`). */
export const RESTART_SETTINGS = ["serverPath", "serverArgs", "model", "baseUrl", "preset"].map((name) => `agentLsp.${name}`);

/** Whether to ask the server for ghost text: `agentLsp.inlineCompletion.enabled`, on by default. */
export function inlineCompletionEnabled(config: { get<T>(key: string): T | undefined }): boolean {
  return config.get<boolean>("inlineCompletion.enabled") !== false;
}
