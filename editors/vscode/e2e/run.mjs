// The extension in a real VS Code: code-server 4.96.4 (VS Code 1.96.4) with the built .vsix,
// a Python workspace served by pyright through agent-lsp, the loopback model endpoint, and the
// system Chromium driven by playwright-core. Each check goes through the UI as a user would and
// leaves a screenshot in target/test-artifacts/vscode-ui/. Run by .ci/run (`npm run test:ui`).

import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { chromium } from "playwright-core";

import { API_KEY, ANSWER, FIM_TEXT, HOOKS, PLAN, modelScript, writeWorkspace, MAIN } from "./fixture.mjs";
import * as processes from "./processes.mjs";
import { Workbench, WAIT, pageHelpers } from "./ui.mjs";

const { paths } = processes;

/** Each check, in order; a failing one stops the run with its screenshot. */
const checks = [
  ["the extension activates and starts `agent-lsp serve --stdio`", activation],
  ["the API key set from the palette is kept in SecretStorage, not in settings", apiKey],
  ["F12 across non-ASCII text lands on the definition", definition],
  ["hover shows pyright's answer", hover],
  ["a type error is in the Problems panel", problems],
  ["`@` completes workspace paths in a prompt document", completion],
  ["Send to agent streams the answer in", send],
  ["Fix with agent changes the buffer, unsaved, and the problem goes", fix],
  ["the plan the agent wrote is in the status bar and the Agent Plan view", plan],
  ["Agent: Rewind Last Turn… takes the fix back out of the buffer, through the editor", rewind],
  ["a background job is in the Agent Activity view, and its stop button kills it", activity],
  ["opening a README or a prompt document shows no error, and the hook's refusal of the fix turn's `rm -rf` is a warning", noErrors],
  ["inline completion: no ghost text while the setting is off, then the server's suggestion as ghost text, taken with Tab", inlineCompletion],
  ["a server that cannot start is reported once, with its reason and its output", startFailure],
];

async function activation(ui, run) {
  await ui.waitForServerState("agent-lsp ready");
  const servers = processes.serverProcesses().filter((server) => server.argv[0].startsWith(paths.binaries));
  assert.equal(servers.length, 1, `one agent-lsp serve: ${JSON.stringify(servers)}`);
  // From PATH (no agentLsp.serverPath is set), with the `--stdio` vscode-languageclient adds.
  assert.deepEqual(servers[0].argv.slice(1), ["serve", "--stdio"]);
  run.serverPid = servers[0].pid;
  await ui.screenshot("activated");
}

async function apiKey(ui, run) {
  await ui.command("Agent: Set API Key");
  const input = ui.page.locator('.quick-input-widget input[type="password"]');
  await input.waitFor({ state: "visible", timeout: WAIT });
  await input.fill(API_KEY);
  await ui.screenshot("api-key-input");
  await ui.page.keyboard.press("Enter");
  await ui.page.locator(".notification-toast", { hasText: "API key stored" }).waitFor({ timeout: WAIT });
  await ui.waitForServerState("agent-lsp ready");
  const servers = processes.serverProcesses().filter((server) => server.argv[0].startsWith(paths.binaries));
  assert.equal(servers.length, 1, JSON.stringify(servers));
  assert.notEqual(servers[0].pid, run.serverPid, "the server was restarted with the key");
  // Not in any settings file: user settings, workspace settings.
  for (const file of [path.join(run.userDataDir, "User/settings.json"), path.join(run.workspace, ".vscode/settings.json")]) {
    if (fs.existsSync(file)) {
      assert.ok(!fs.readFileSync(file, "utf8").includes(API_KEY), `${file} holds the key`);
    }
  }
  // The endpoint refuses requests without `Authorization: Bearer <key>`, so every turn below
  // shows that the server got the key, and the extension reads it from SecretStorage only.
  await ui.screenshot("api-key-stored");
}

async function definition(ui) {
  await ui.open("main.py");
  const line = MAIN.split("\n")[2];
  // The emoji before `Fläche` is two UTF-16 units (what Go to Line and LSP count) but one
  // character (what the status bar counts).
  const before = line.slice(0, line.indexOf("Fläche"));
  await ui.goTo(3, before.length + 1, [...before].length + 1);
  // pyright starts when main.py opens and registers its definition provider when it is up;
  // F12 before that finds nothing. So press it as a person would, again until it lands, each
  // time waiting for the tab (the whole wait is bounded by WAIT).
  const deadline = Date.now() + WAIT;
  for (;;) {
    await ui.page.keyboard.press("F12");
    try {
      await ui.waitForActiveTab("shapes.py", 3000);
      break;
    } catch (error) {
      if (Date.now() > deadline) {
        throw error;
      }
    }
  }
  await ui.waitForCursor(4, 7);
  await ui.screenshot("definition");
}

async function hover(ui) {
  // Show Hover at the cursor, which F12 left on `Fläche` in shapes.py.
  await ui.page.keyboard.press("Control+K");
  await ui.page.keyboard.press("Control+I");
  const shown = ui.page.locator(".monaco-hover .hover-contents", { hasText: "class Fläche" }).first();
  await shown.waitFor({ timeout: WAIT });
  await ui.screenshot("hover");
  await ui.page.keyboard.press("Escape");
}

async function problems(ui) {
  await ui.open("typos.py");
  await ui.command("View: Focus Problems");
  await ui.page.locator(".markers-panel .monaco-list-row", { hasText: "is not assignable to declared type" }).first().waitFor({ timeout: WAIT });
  await ui.screenshot("problems");
}

async function completion(ui) {
  await ui.open("notes.agent.md");
  await ui.page.keyboard.press("Control+End");
  await ui.page.keyboard.type("Compare @geo/sh");
  const row = ui.page.locator(".suggest-widget .monaco-list-row", { hasText: "geo/shapes.py" }).first();
  await row.waitFor({ timeout: WAIT });
  await ui.screenshot("completion");
  await ui.page.keyboard.press("Enter");
  await ui.waitForEditorText({ contains: ["Compare @geo/shapes.py"] }, "the accepted completion");
}

async function send(ui) {
  await ui.goTo(1, 5);
  await ui.record();
  await ui.codeAction("Send to agent");
  // A screenshot while the answer streams (begun, not whole), if the editor ever shows one.
  const first = await ui.page.waitForFunction(
    (answer) => {
      const text = window.__agentUi.editorText();
      const shown = text.split("## agent (turn 1)")[1];
      if (shown === undefined || shown.trim() === "") {
        return false;
      }
      if (shown.includes(answer)) {
        return "whole";
      }
      return shown.includes(answer.slice(0, 60)) && "partial";
    },
    ANSWER,
    { timeout: WAIT, polling: "raf" },
  );
  if ((await first.jsonValue()) === "partial") {
    await ui.screenshot("send-streaming");
  }
  await ui.waitForEditorText({ contains: [ANSWER, "## you"] }, "the whole answer");
  await ui.waitForServerState("agent-lsp ready");
  await ui.screenshot("send-answered");
  const { texts, states } = await ui.recorded();
  const partials = new Set(
    texts
      .map((text) => text.split("## agent (turn 1)")[1])
      .filter((answer) => answer !== undefined && answer.trim() !== "" && !answer.includes(ANSWER)),
  );
  assert.ok(
    partials.size >= 2,
    `the answer was not streamed: the editor showed ${partials.size} partial states before the whole answer (at least 2 expected, from 49 chunks 50 ms apart):\n${[...partials].join("\n---\n")}`,
  );
  assert.ok(states.some((state) => state.startsWith("agent-lsp turn running")), `no running turn in the status bar: ${states.join(" | ")}`);
}

async function fix(ui, run) {
  await ui.open("typos.py");
  await ui.goTo(3, 17);
  await ui.codeAction("Fix with agent");
  await ui.waitForEditorText({ contains: ["anzahl: int = 3"], lacks: ['"drei"'] }, "the fixed buffer");
  assert.ok(await ui.activeTabIsDirty(), "the fix is in the buffer, unsaved");
  assert.ok(fs.readFileSync(path.join(run.workspace, "typos.py"), "utf8").includes('anzahl: int = "drei"'), "the file on disk is untouched");
  await ui.page
    .locator(".markers-panel .monaco-list-row", { hasText: "is not assignable to declared type" })
    .first()
    .waitFor({ state: "detached", timeout: WAIT });
  await ui.waitForServerState("agent-lsp ready");
  await ui.screenshot("fixed");
}

async function plan(ui) {
  // The fix turn's model wrote a plan with `todo` and left it open.
  await ui.waitForServerState("agent-lsp ready");
  const label = await ui.page.waitForFunction(
    () => {
      const label = document.getElementById("agent-lsp.agent-lsp.agentLsp.status")?.getAttribute("aria-label") ?? "";
      return label.includes("plan 0/2 done") && label;
    },
    undefined,
    { timeout: WAIT, polling: "raf" },
  );
  assert.match(await label.jsonValue(), new RegExp(`plan 0/2 done, now: ${PLAN[0].text}`));
  await ui.command("Agent: Show Plan");
  for (const item of PLAN) {
    await ui.page.locator(".monaco-list-row", { hasText: item.text }).first().waitFor({ timeout: WAIT });
  }
  await ui.page.locator(".monaco-list-row", { hasText: "Goal" }).first().waitFor({ timeout: WAIT });
  await ui.screenshot("plan");
}

async function rewind(ui, run) {
  await ui.open("typos.py");
  await ui.command("Agent: Rewind Last Turn…");
  // The newest turn first, with the files it changed: the fix's edit of typos.py.
  const row = ui.page.locator(".quick-input-widget .monaco-list-row.focused", { hasText: "typos.py (edit)" });
  await row.first().waitFor({ timeout: WAIT });
  await ui.screenshot("rewind-turns");
  await ui.page.keyboard.press("Enter");
  const input = ui.page.locator(".quick-input-widget .quick-input-box input");
  await ui.page.locator(".quick-input-widget .monaco-list-row", { hasText: "Files Only" }).first().waitFor({ timeout: WAIT });
  await input.fill("Files Only");
  await ui.page.locator(".quick-input-widget .monaco-list-row.focused", { hasText: "Files Only" }).first().waitFor({ timeout: WAIT });
  await ui.page.keyboard.press("Enter");
  await ui.waitForEditorText({ contains: ['anzahl: int = "drei"'] }, "the buffer without the fix");
  await ui.page.locator(".notifications-toasts", { hasText: "Rewind of turn" }).first().waitFor({ timeout: WAIT });
  await ui.screenshot("rewound");
  assert.ok(fs.readFileSync(path.join(run.workspace, "typos.py"), "utf8").includes('anzahl: int = "drei"'), "the disk was never written");
  // The rewind is one edit of the buffer: Undo in the editor brings the fix back.
  await ui.page.locator(".editor-group-container.active .monaco-editor").first().click();
  await ui.page.keyboard.press("Control+Z");
  await ui.waitForEditorText({ contains: ["anzahl: int = 3"], lacks: ['"drei"'] }, "the fix back after Undo");
}

/** The live `sleep 30` processes started in the test's workspace (a job's). */
function sleepers(run) {
  return fs
    .readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        const argv = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8");
        const state = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(")").pop().trim()[0];
        return argv === "sleep\u000030\u0000" && state !== "Z" && fs.readlinkSync(`/proc/${pid}/cwd`) === run.workspace;
      } catch {
        return false;
      }
    });
}

async function activity(ui, run) {
  // A job started by hand (Run Tool…), so no model turn is needed. The sandbox would hold it
  // without a question; it asks for the network, so the user is asked, and told why.
  await ui.command("Agent: Run Tool");
  const input = ui.page.locator(".quick-input-widget .quick-input-box input");
  await input.waitFor({ state: "visible", timeout: WAIT });
  await input.fill("shell");
  await ui.page.keyboard.press("Enter");
  await ui.page.locator(".quick-input-widget", { hasText: "Arguments of shell" }).waitFor({ timeout: WAIT });
  await input.fill(JSON.stringify({ command: "sleep 30", background: true, leave_sandbox: "network" }));
  await ui.page.keyboard.press("Enter");
  const ask = ui.page
    .locator(".notification-toast", { hasText: "wants to run" })
    .filter({ hasText: "the command asks to run with the network on" })
    .first();
  await ask.waitFor({ timeout: WAIT });
  await ask.locator(".monaco-button", { hasText: "Allow" }).click();
  // The tool's result opens in an editor and takes the focus: the palette is opened after it,
  // or its keys would land in that editor.
  await ui.page.locator(".monaco-editor", { hasText: "started background job" }).first().waitFor({ timeout: WAIT });
  await ui.command("Agent: Show Activity");
  const row = ui.page.locator(".monaco-list-row", { hasText: "sleep 30" }).first();
  await row.waitFor({ timeout: WAIT });
  assert.equal(sleepers(run).length, 1, "the job's sleep runs");
  await ui.screenshot("activity-running");
  await row.hover();
  await row.locator('.action-label[aria-label="Stop Job or Sub-agent"]').click();
  await ui.page.locator(".monaco-list-row", { hasText: "sleep 30" }).filter({ hasText: "killed" }).first().waitFor({ timeout: WAIT });
  assert.deepEqual(sleepers(run), [], "the stopped job's sleep is gone");
  await ui.screenshot("activity-stopped");
}

async function noErrors(ui) {
  for (const name of ["README.md", "notes.agent.md"]) {
    await ui.open(name);
    // Go to Symbol asks every symbol provider, agent-lsp's included, and fills its list (the
    // symbols, or "No editor symbols") once all have answered.
    await ui.command("Go to Symbol in Editor");
    await ui.page.waitForFunction(
      () => {
        const widget = document.querySelector(".quick-input-widget");
        const input = widget?.querySelector(".quick-input-box input");
        const busy = widget?.querySelector(".monaco-progress-container.active");
        return input?.value === "@" && !busy && widget.querySelectorAll(".monaco-list-row").length > 0;
      },
      undefined,
      { timeout: WAIT, polling: "raf" },
    );
    await ui.screenshot(`symbols-${name}`);
    await ui.page.keyboard.press("Escape");
  }
  await ui.command("Notifications: Show Notifications");
  await ui.page.locator(".notifications-center").waitFor({ state: "visible", timeout: WAIT });
  await ui.screenshot("notifications");
  const notifications = await ui.notifications();
  const errors = notifications.filter((notification) => notification.error);
  assert.deepEqual(errors, [], "error notifications were shown");
  // The fix turn's `rm -rf` was refused by the user's hook (HOOKS): a warning, not an error,
  // said so and why; the centre keeps it after its toast hid.
  const refused = notifications.filter((notification) =>
    notification.text.includes("a PreToolUse hook blocked `shell`: rm -rf is not allowed here"),
  );
  assert.equal(refused.length, 1, `the hook's refusal: ${JSON.stringify(notifications)}`);
}

/** The FIM requests the endpoint answered so far (it logs a line for each). */
function fimRequests(run) {
  return (fs.readFileSync(run.endpointLog, "utf8").match(/FIM request #\d+ answered/g) ?? []).length;
}

async function inlineCompletion(ui, run) {
  const ghost = ui.page.locator(".editor-group-container.active .ghost-text-decoration, .editor-group-container.active .ghost-text");
  // agentLsp.inlineCompletion.enabled is false in the test's settings: typing asks nothing.
  await ui.open("inline.py");
  await ui.goTo(3, 1);
  await ui.page.keyboard.type("zwei = Fläche");
  await ui.waitForEditorText({ contains: ["zwei = Fläche"] }, "the typed line");
  await ui.command("Trigger Inline Suggestion");
  await ui.page.waitForTimeout(1500);
  assert.equal(await ghost.count(), 0, "ghost text while agentLsp.inlineCompletion.enabled is off");
  assert.equal(fimRequests(run), 0, "a FIM request while agentLsp.inlineCompletion.enabled is off");
  await ui.screenshot("inline-off");
  // Turned on in the Settings editor: the next request goes to the server, without a restart.
  await ui.command("Preferences: Open User Settings");
  await ui.page.locator(".settings-editor .settings-header .monaco-editor.focused").waitFor({ timeout: WAIT });
  await ui.page.keyboard.type("agentLsp.inlineCompletion.enabled");
  const checkbox = ui.page.locator('.settings-editor .setting-item-contents[data-key="agentLsp.inlineCompletion.enabled"] .setting-value-checkbox');
  await checkbox.waitFor({ state: "visible", timeout: WAIT });
  await checkbox.click();
  await ui.page
    .locator('.settings-editor .setting-item-contents[data-key="agentLsp.inlineCompletion.enabled"] .setting-value-checkbox.checked')
    .waitFor({ timeout: WAIT });
  await ui.open("inline.py");
  await ui.goTo(3, "zwei = Fläche".length + 1);
  // Typing triggers VS Code's automatic request; the palette's trigger asks again if that one
  // came before pyright was ready to ground it (the answer is the same either way).
  const shown = ghost.filter({ hasText: FIM_TEXT }).first();
  const deadline = Date.now() + WAIT;
  for (;;) {
    await ui.command("Trigger Inline Suggestion");
    try {
      await shown.waitFor({ timeout: 5000 });
      break;
    } catch (error) {
      if (Date.now() > deadline) {
        throw error;
      }
    }
  }
  assert.ok(fimRequests(run) >= 1, "the ghost text came from the endpoint's FIM route");
  await ui.screenshot("inline-ghost-text");
  await ui.page.keyboard.press("Tab");
  await ui.waitForEditorText({ contains: [`zwei = Fläche${FIM_TEXT}`] }, "the accepted suggestion");
  await ghost.first().waitFor({ state: "detached", timeout: WAIT });
  await ui.screenshot("inline-accepted");
  // Leave the file as it was on disk for the checks after this one.
  await ui.command("File: Revert File");
}

async function startFailure(ui, run) {
  // A binary that fails as a wrong one would: a reason on stderr, exit 2.
  const broken = path.join(run.temp, "broken-agent-lsp");
  fs.writeFileSync(broken, '#!/bin/sh\necho "error: this agent-lsp refuses to serve (a test double)" >&2\nexit 2\n', { mode: 0o755 });
  // Changing agentLsp.serverPath in the Settings editor restarts the server.
  await ui.setSetting("agentLsp.serverPath", broken, "Remote");
  await ui.waitForServerState("agent-lsp failed");
  // A toast, or a row of the notification centre when that is open.
  const toast = ui.page.locator(".notification-list-item", { hasText: "agent-lsp could not start" }).first();
  await toast.waitFor({ timeout: WAIT });
  const text = await toast.textContent();
  assert.match(text, /this agent-lsp refuses to serve/, "the notification has the server's own reason");
  assert.doesNotMatch(text, /EPIPE/);
  await ui.screenshot("start-failed");
  const errors = async () => (await ui.notifications()).filter((notification) => notification.error);
  assert.equal((await errors()).length, 1, `one error notification: ${JSON.stringify(await errors())}`);
  await toast.locator(".monaco-button", { hasText: "Show Output" }).click();
  // The channel holds every start's lines; Find in the output scrolls to the reason.
  const output = ui.page.locator(".output-view .monaco-editor .overflow-guard");
  await output.waitFor({ timeout: WAIT });
  // Its text still grows while the client logs the failure, so the click does not wait for
  // it to hold still; the top left corner is clear of the notifications.
  await output.click({ position: { x: 40, y: 8 }, force: true });
  await ui.page.locator(".output-view .monaco-editor.focused").waitFor({ timeout: WAIT });
  await ui.page.keyboard.press("Control+F");
  await ui.page.locator(".output-view .find-widget.visible").waitFor({ timeout: WAIT });
  await ui.page.keyboard.type("refuses to serve");
  await ui.page.locator(".output-view .find-widget .matchesCount", { hasText: /\d+ of \d+/ }).waitFor({ timeout: WAIT });
  await ui.page.locator(".output-view .view-lines", { hasText: "this agent-lsp refuses to serve" }).waitFor({ timeout: WAIT });
  await ui.screenshot("start-failed-output");
  // The button took its notification away, and no other came (no retries, no second message).
  assert.deepEqual(await errors(), []);
  await ui.setSetting("agentLsp.serverPath", "", "Remote");
  await ui.waitForServerState("agent-lsp ready");
}

/** The agent-lsp output channel (the extension's and the server's lines), kept with the screenshots. */
function copyExtensionLog(userDataDir, artifacts) {
  const logs = path.join(userDataDir, "logs");
  for (const session of fs.existsSync(logs) ? fs.readdirSync(logs) : []) {
    const log = path.join(logs, session, "exthost1/agent-lsp.agent-lsp/agent-lsp.log");
    if (fs.existsSync(log)) {
      fs.copyFileSync(log, path.join(artifacts, "agent-lsp-output.log"));
    }
  }
}

async function main() {
  processes.checkPieces();
  fs.rmSync(paths.artifacts, { recursive: true, force: true });
  fs.mkdirSync(paths.artifacts, { recursive: true });
  const temp = fs.mkdtempSync(path.join(os.tmpdir(), "agent-lsp-ui-"));
  const run = { temp, workspace: path.join(temp, "workspace"), userDataDir: path.join(temp, "user-data") };
  fs.mkdirSync(run.workspace);
  writeWorkspace(run.workspace);
  const scriptFile = path.join(temp, "model-script.json");
  fs.writeFileSync(scriptFile, JSON.stringify(modelScript()));
  const logs = { endpoint: path.join(paths.artifacts, "model-endpoint.log"), codeServer: path.join(paths.artifacts, "code-server.log") };
  let endpoint, codeServer, browser;
  const started = Date.now();
  try {
    run.endpointLog = logs.endpoint;
    endpoint = await processes.startModelEndpoint(scriptFile, API_KEY, logs.endpoint, FIM_TEXT);
    const home = path.join(temp, "home");
    fs.mkdirSync(path.join(run.userDataDir, "User"), { recursive: true });
    fs.mkdirSync(home);
    // The web build saves files by default; desktop VS Code does not, and Fix with agent must
    // leave its edit unsaved.
    const settings = {
      "files.autoSave": "off",
      "workbench.startupEditor": "none",
      "workbench.tips.enabled": false,
      "telemetry.telemetryLevel": "off",
      "extensions.autoCheckUpdates": false,
      "extensions.autoUpdate": false,
      "editor.hover.delay": 10000,
      "agentLsp.baseUrl": endpoint.baseUrl,
      "agentLsp.model": "deepseek-v4-flash",
      // Off until the inline completion check turns it on, so that no ghost text comes into
      // the checks before it.
      "agentLsp.inlineCompletion.enabled": false,
    };
    fs.writeFileSync(path.join(run.userDataDir, "User/settings.json"), JSON.stringify(settings, null, 2));
    const configFile = path.join(temp, "code-server.yaml");
    const extensionsDir = path.join(temp, "extensions");
    // VS Code takes the extension host's environment from the user's login shell, so agent-lsp
    // and pyright are put on PATH where a user would: in the shell profile.
    fs.writeFileSync(path.join(home, ".bash_profile"), `export PATH="${paths.binaries}:${paths.tools}:$PATH"\n`);
    // Inline completion from the endpoint's FIM route (its root, without `/v1`), with the same
    // key the endpoint demands of every request.
    const fimBase = endpoint.baseUrl.replace(/\/v1$/, "");
    fs.writeFileSync(
      path.join(temp, "agent-lsp.toml"),
      `${HOOKS}\n[completion]\nmodel = "deepseek-v4-flash"\nbase_url = "${fimBase}/beta"\napi_key_env = "AGENT_LSP_UI_FIM_KEY"\n`,
    );
    const env = {
      PATH: process.env.PATH,
      HOME: home,
      SHELL: "/bin/bash",
      AGENT_LSP_STATE_DIR: path.join(temp, "state"),
      AGENT_LSP_CONFIG: path.join(temp, "agent-lsp.toml"),
      AGENT_LSP_UI_FIM_KEY: API_KEY,
    };
    processes.installExtension({ extensionsDir, userDataDir: run.userDataDir, configFile, env });
    codeServer = await processes.startCodeServer({ userDataDir: run.userDataDir, extensionsDir, configFile, env, log: logs.codeServer });
    browser = await chromium.launch({ executablePath: paths.chromium, args: ["--no-sandbox", "--disable-gpu"] });
    const page = await browser.newPage({ viewport: { width: 1400, height: 860 } });
    await page.addInitScript(pageHelpers);
    await page.goto(`${codeServer.url}/?folder=${encodeURIComponent(run.workspace)}`);
    await page.locator(".monaco-workbench").waitFor({ timeout: WAIT });
    const ui = new Workbench(page, paths.artifacts);
    let passed = 0;
    for (const [name, check] of checks) {
      const begun = Date.now();
      try {
        await check(ui, run);
      } catch (error) {
        await ui.screenshot("failed").catch(() => {});
        copyExtensionLog(run.userDataDir, paths.artifacts);
        console.log(`not ok - ${name}\n${error.stack ?? error}`);
        console.log(`${checks.length - passed - 1} checks after it were not run`);
        console.log(`vscode-ui: ${passed} passed, 1 failed`);
        console.log(`artifacts: ${paths.artifacts}`);
        return 1;
      }
      passed += 1;
      console.log(`ok - ${name} (${((Date.now() - begun) / 1000).toFixed(1)} s)`);
    }
    await browser.close();
    browser = undefined;
    copyExtensionLog(run.userDataDir, paths.artifacts);
    await processes.stop(codeServer.child);
    await processes.stopModelEndpoint(endpoint, logs.endpoint);
    endpoint = undefined;
    console.log(`screenshots: ${paths.artifacts}`);
    console.log(`the VS Code UI test took ${((Date.now() - started) / 1000).toFixed(1)} s`);
    console.log(`vscode-ui: ${passed} passed, 0 failed`);
    return 0;
  } finally {
    await browser?.close().catch(() => {});
    await processes.stop(codeServer?.child);
    endpoint?.child.stdin.end();
    await endpoint?.child.exited;
    if (process.env.UI_TEST_KEEP) {
      console.log(`kept the test's folder: ${temp}`);
    } else {
      // The editor's processes (extension host, agent-lsp, pyright) end just after
      // code-server and may still write their last files: retry, as `rm -rf` racing them would.
      fs.rmSync(temp, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
    }
  }
}

process.exitCode = await main().catch((error) => {
  console.log(`vscode-ui: ${error.stack ?? error}`);
  return 1;
});
