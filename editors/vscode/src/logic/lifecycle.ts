// What the extension needs to report a server that does not start or stops, without `vscode`:
// the last lines of its stderr (where agent-lsp says why), the one message shown for a failure,
// and how many crashes of a running server are restarted before giving up.

/** The last `limit` lines written to a stream, for the failure message. */
export class LineTail {
  private lines: string[] = [];

  constructor(private readonly limit = 8) {}

  push(line: string): void {
    const trimmed = line.trimEnd();
    if (trimmed === "") {
      return;
    }
    this.lines.push(trimmed);
    if (this.lines.length > this.limit) {
      this.lines.shift();
    }
  }

  clear(): void {
    this.lines = [];
  }

  get(): string[] {
    return [...this.lines];
  }
}

/** What a thrown value says, without the `Error: ` prefix `String(error)` adds. */
export function errorText(error: unknown): string {
  if (error instanceof Error) {
    return error.message;
  }
  if (error !== null && typeof error === "object" && "message" in error) {
    return String((error as { message: unknown }).message);
  }
  return String(error);
}

/**
 * The one notification for a server that did not start or stopped: the command, then the
 * server's own last words on stderr (agent-lsp and clap say there what is wrong), else what the
 * client saw. A broken pipe or a closed connection is what the client sees of a process that
 * exited, never the reason, so it is left out when stderr has one.
 */
export function failureMessage(what: "start" | "stopped", commandLine: string, stderr: string[], error?: unknown): string {
  const head = what === "start" ? `agent-lsp could not start (\`${commandLine}\`)` : `agent-lsp stopped (\`${commandLine}\`)`;
  const said = stderr.slice(-3).join(" / ");
  if (said !== "") {
    return `${head}: ${said}`;
  }
  const seen = error === undefined ? "" : errorText(error);
  return seen === "" ? `${head}; its output has the details.` : `${head}: ${seen}`;
}

/** Crashes of a running server restarted within `windowMs` before the extension gives up. */
export class RestartBudget {
  private crashes: number[] = [];

  constructor(
    private readonly limit = 3,
    private readonly windowMs = 3 * 60 * 1000,
  ) {}

  /** Record a crash at `now`; whether the server may be restarted once more. */
  allow(now: number): boolean {
    this.crashes = this.crashes.filter((at) => now - at < this.windowMs);
    this.crashes.push(now);
    return this.crashes.length <= this.limit;
  }

  reset(): void {
    this.crashes = [];
  }
}
