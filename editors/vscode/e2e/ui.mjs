// Driving the VS Code workbench through its UI the way a user does (keys, the palette, clicks),
// and reading its state from the DOM. Every helper waits for the state it needs (an element,
// a text); none sleeps.

import * as path from "node:path";

/** How long one UI state may take to appear (pyright's first analysis is the slowest). */
export const WAIT = 60_000;

export class Workbench {
  constructor(page, artifacts) {
    this.page = page;
    this.artifacts = artifacts;
    this.shots = [];
  }

  async screenshot(name) {
    const file = path.join(this.artifacts, `${String(this.shots.length + 1).padStart(2, "0")}-${name}.png`);
    await this.page.screenshot({ path: file });
    this.shots.push(file);
    return file;
  }

  /** The agent-lsp status bar item's label, which starts with the server's state. */
  statusItem() {
    return this.page.locator('[id="agent-lsp.agent-lsp.agentLsp.status"] a, [id="agent-lsp.agent-lsp.agentLsp.status"][aria-label]').first();
  }

  async waitForServerState(prefix) {
    await this.page.waitForFunction(
      (prefix) => {
        const item = document.getElementById("agent-lsp.agent-lsp.agentLsp.status");
        return item !== null && (item.getAttribute("aria-label") ?? "").startsWith(prefix);
      },
      prefix,
      { timeout: WAIT },
    );
  }

  async serverState() {
    return this.page.evaluate(() => document.getElementById("agent-lsp.agent-lsp.agentLsp.status")?.getAttribute("aria-label") ?? "");
  }

  /** Run a command from the palette by its title. */
  async command(title) {
    await this.page.keyboard.press("F1");
    const input = this.page.locator(".quick-input-widget .quick-input-box input");
    await input.waitFor({ state: "visible", timeout: WAIT });
    await input.fill(`>${title}`);
    await this.page
      .locator(".quick-input-widget .monaco-list-row.focused", { hasText: title })
      .first()
      .waitFor({ timeout: WAIT });
    await this.page.keyboard.press("Enter");
  }

  /**
   * Set a text setting in the Settings editor, as a user types it; the editor stays open (the
   * caller waits for what the change does, then closes it). `tab` is the scope's tab:
   * machine-scoped settings such as agentLsp.serverPath are set under "Remote" in
   * code-server, as in any remote window.
   */
  async setSetting(id, value, tab = "User") {
    await this.command("Preferences: Open User Settings");
    await this.page.locator(".settings-editor .settings-header .monaco-editor.focused").waitFor({ timeout: WAIT });
    await this.page.keyboard.type(id);
    await this.page.locator(".settings-editor .settings-tabs-widget .action-label", { hasText: tab }).first().click();
    const input = this.page.locator(`.settings-editor .setting-item-contents[data-key="${id}"] .setting-item-control input`);
    await input.waitFor({ state: "visible", timeout: WAIT });
    await input.fill(value);
    await input.press("Enter");
  }

  /** Open a workspace file through Quick Open and wait for its editor. */
  async open(name) {
    await this.page.keyboard.press("Control+P");
    const input = this.page.locator(".quick-input-widget .quick-input-box input");
    await input.waitFor({ state: "visible", timeout: WAIT });
    await input.fill(name);
    await this.page
      .locator(".quick-input-widget .monaco-list-row.focused", { hasText: path.basename(name) })
      .first()
      .waitFor({ timeout: WAIT });
    await this.page.keyboard.press("Enter");
    await this.waitForActiveTab(path.basename(name));
    await this.page.locator(".editor-group-container.active .monaco-editor.focused").waitFor({ timeout: WAIT });
  }

  async waitForActiveTab(name, timeout = WAIT) {
    await this.page.locator(".editor-group-container.active .tab.active", { hasText: name }).first().waitFor({ timeout });
  }

  /** Whether the active tab shows unsaved changes. */
  async activeTabIsDirty() {
    return this.page.locator(".editor-group-container.active .tab.active.dirty").count().then((count) => count > 0);
  }

  /**
   * Move the cursor with Go to Line. Its column counts UTF-16 units, as LSP does; the status
   * bar counts characters (an emoji is one), which `shownColumn` gives when they differ.
   */
  async goTo(line, column, shownColumn = column) {
    await this.page.keyboard.press("Control+G");
    const input = this.page.locator(".quick-input-widget .quick-input-box input");
    await input.waitFor({ state: "visible", timeout: WAIT });
    await input.fill(`:${line}:${column}`);
    await this.page.keyboard.press("Enter");
    await this.waitForCursor(line, shownColumn);
  }

  async waitForCursor(line, column) {
    await this.page.locator("#status\\.editor\\.selection", { hasText: `Ln ${line}, Col ${column}` }).waitFor({ timeout: WAIT });
  }

  /** The visible text of the active editor, lines in order, spaces as spaces. */
  async editorText() {
    return this.page.evaluate(() => window.__agentUi.editorText());
  }

  /** Wait until the active editor shows every text of `contains` and none of `lacks`. */
  async waitForEditorText({ contains = [], lacks = [] }, what) {
    await this.page
      .waitForFunction(
        ({ contains, lacks }) => {
          const text = window.__agentUi.editorText();
          return contains.every((part) => text.includes(part)) && !lacks.some((part) => text.includes(part));
        },
        { contains, lacks },
        { timeout: WAIT, polling: "raf" },
      )
      .catch(async (error) => {
        throw new Error(`${what}: ${error.message}\nthe editor shows:\n${await this.editorText()}`);
      });
  }

  /**
   * Record, from now on, every distinct text of the active editor and every state of the
   * status bar item, as the DOM changes (a MutationObserver, so no state between two polls is
   * missed); `recorded()` returns them in order.
   */
  async record() {
    await this.page.evaluate(() => window.__agentUi.record());
  }

  async recorded() {
    return this.page.evaluate(() => window.__agentUi.recorded());
  }

  /**
   * Open the quick fix menu at the cursor and choose the action whose title starts so, with
   * the keyboard (the menu's pointer block takes clicks meant for it).
   */
  async codeAction(title) {
    await this.page.keyboard.press("Control+.");
    const rows = ".action-widget .monaco-list-row.action";
    await this.page.locator(rows, { hasText: title }).first().waitFor({ timeout: WAIT });
    const focused = () => this.page.evaluate((rows) => document.querySelector(`${rows}.focused`)?.getAttribute("aria-label") ?? "", rows);
    const count = await this.page.locator(rows).count();
    for (let step = 0; !(await focused()).startsWith(title); step += 1) {
      if (step > count) {
        throw new Error(`no code action "${title}" could be focused`);
      }
      const before = await focused();
      await this.page.keyboard.press("ArrowDown");
      await this.page.waitForFunction(
        ({ rows, before }) => (document.querySelector(`${rows}.focused`)?.getAttribute("aria-label") ?? "") !== before,
        { rows, before },
        { timeout: WAIT, polling: "raf" },
      );
    }
    await this.page.keyboard.press("Enter");
  }

  /** The rows of the Problems panel. */
  async problems() {
    return this.page.locator(".markers-panel .monaco-list-row").allTextContents();
  }

  /** Every notification so far (the centre keeps them after their toasts hide), with severity. */
  async notifications() {
    return this.page.evaluate(() =>
      [...document.querySelectorAll(".notifications-list-container .monaco-list-row, .notification-toast .monaco-list-row")].map((row) => ({
        error: row.querySelector(".codicon-error") !== null,
        text: row.textContent ?? "",
      })),
    );
  }
}

/**
 * Installed in the page before VS Code loads (`page.addInitScript`): reads the active editor's
 * rendered lines (sorted by position; VS Code does not keep them in DOM order) and records
 * what the editor and the status bar item show while a turn streams.
 */
export function pageHelpers() {
  const editorText = () => {
    const editor =
      document.querySelector(".editor-group-container.active .monaco-editor.focused") ??
      document.querySelector(".editor-group-container.active .monaco-editor");
    if (!editor) {
      return "";
    }
    return [...editor.querySelectorAll(".view-lines .view-line")]
      .map((line) => ({ top: parseFloat(line.style.top || "0"), text: (line.textContent ?? "").replace(/\u00a0/g, " ") }))
      .sort((a, b) => a.top - b.top)
      .map((line) => line.text)
      .join("\n");
  };
  const state = () => document.getElementById("agent-lsp.agent-lsp.agentLsp.status")?.getAttribute("aria-label") ?? "";
  let texts = [];
  let states = [];
  let observer;
  const note = () => {
    const text = editorText();
    if (texts[texts.length - 1] !== text) {
      texts.push(text);
    }
    const now = state();
    if (states[states.length - 1] !== now) {
      states.push(now);
    }
  };
  window.__agentUi = {
    editorText,
    record() {
      texts = [];
      states = [];
      observer?.disconnect();
      observer = new MutationObserver(note);
      observer.observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
      note();
    },
    recorded() {
      return { texts, states };
    },
  };
}
