// The server's command line and `initializationOptions` from the extension's settings, without
// `vscode`.

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

/** `agentLsp.serverPath` (with `~` expanded), else `agent-lsp` from `PATH`; always `serve`. */
export function serverCommand(settings: Settings, home: string = os.homedir()): ServerCommand {
  let command = (settings.serverPath ?? "").trim();
  if (command === "") {
    command = "agent-lsp";
  } else if (command === "~" || command.startsWith("~/")) {
    command = path.join(home, command.slice(1));
  }
  return { command, args: [...(settings.serverArgs ?? []), "serve"] };
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
