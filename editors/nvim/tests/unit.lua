-- Unit tests of the plugin's pure logic (no server): `nvim --headless --clean -l tests/unit.lua`.
-- Run by tests/e2e/editors.rs; prints "N passed, M failed" and exits non-zero on a failure.

local root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h")
vim.opt.rtp:prepend(root)

local ext = require("agent_lsp.ext")
local context = require("agent_lsp.context")
local plan_view = require("agent_lsp.plan")
local memory_view = require("agent_lsp.memory")
local activity_view = require("agent_lsp.activity")
local inline = require("agent_lsp.inline")
local rewind = require("agent_lsp.rewind")

local passed, failed = 0, 0
local function test(name, fn)
  local ok, err = pcall(fn)
  if ok then
    passed = passed + 1
  else
    failed = failed + 1
    io.stderr:write("FAIL " .. name .. ": " .. tostring(err) .. "\n")
  end
end

local function eq(actual, expected)
  if not vim.deep_equal(actual, expected) then
    error(string.format("expected %s, got %s", vim.inspect(expected), vim.inspect(actual)), 2)
  end
end

local function diagnostic(line, first, last, severity, message)
  return {
    range = { start = { line = line, character = first }, ["end"] = { line = line, character = last } },
    severity = severity,
    message = message,
  }
end

test("initializationOptions are camelCase and leave out empty values", function()
  eq(ext.init_options({}, nil), nil)
  eq(
    ext.init_options({ model = "deepseek-v4-flash", base_url = " http://127.0.0.1:9/v1 ", preset = "" }, "sk-1"),
    { model = "deepseek-v4-flash", baseUrl = "http://127.0.0.1:9/v1", apiKey = "sk-1" }
  )
end)

test("the diagnostic under the cursor prefers errors, then the narrowest", function()
  local warning = diagnostic(1, 0, 20, 2, "warning")
  local wide = diagnostic(1, 0, 20, 1, "wide")
  local narrow = diagnostic(1, 5, 8, 1, "narrow")
  eq(ext.diagnostic_at({ warning, wide, narrow }, { line = 1, character = 6 }).message, "narrow")
  eq(ext.diagnostic_at({ warning, wide }, { line = 1, character = 6 }).message, "wide")
  local far, near = diagnostic(4, 30, 32, 1, "far"), diagnostic(4, 10, 12, 1, "near")
  eq(ext.diagnostic_at({ far, near }, { line = 4, character = 0 }).message, "near")
  eq(ext.diagnostic_at({ far, near }, { line = 5, character = 0 }), nil)
end)

test("unknown commands are recognised", function()
  eq(ext.is_unknown_command({ code = -32601, message = "x" }), true)
  eq(ext.is_unknown_command({ code = -32603, message = "unknown command `agent.context.show`" }), true)
  eq(ext.is_unknown_command({ code = -32803, message = "a turn is already running" }), false)
  eq(ext.is_unknown_command(nil), false)
end)

test("turns and status are described in one line", function()
  eq(ext.describe_turn({ outcome = "answered", steps = 1 }), "agent-lsp: answered in 1 step")
  eq(ext.describe_turn({ outcome = "cancelled", steps = 2, changed = { "a.py" } }), "agent-lsp: cancelled after 2 steps; changed a.py")
  eq(ext.format_status({ session = "2026-abcd", context_tokens = 12345, cache_hit_share = 0.874 }), "agent abcd 12k ctx 87% cached")
  eq(ext.format_status({ session = "2026-abcd", context_tokens = vim.NIL, cache_hit_share = vim.NIL }), "agent abcd")
  eq(ext.format_status({ running = true }), "agent: running")
end)

local plan = {
  goal = "Make the parser accept trailing commas.\nKeep the old errors.",
  goal_source = "prompt",
  items = {
    { text = "Read the lexer", status = "done" },
    { text = "Fix lex()", status = "in_progress" },
    { text = "Run the tests", status = "pending" },
  },
  open = 2,
}

test("the plan float shows the goal, then each item with its mark", function()
  eq(plan_view.render(plan), {
    "Goal (first prompt):",
    "  Make the parser accept trailing commas.",
    "  Keep the old errors.",
    "",
    "Plan: 1/3 done, now: Fix lex()",
    "  [x] Read the lexer",
    "  [>] Fix lex()",
    "  [ ] Run the tests",
  })
  eq(plan_view.render({ goal = "Ship", goal_source = "set", items = {}, open = 0 }), { "Goal (set):", "  Ship" })
  eq(plan_view.render(nil), { "No plan yet: the agent writes one with its todo tool." })
  eq(plan_view.render({ goal = vim.NIL, items = {}, open = 0 }), { "No plan yet: the agent writes one with its todo tool." })
  local buf, win = plan_view.show(plan)
  eq(vim.api.nvim_win_get_config(win).relative, "editor")
  eq(vim.api.nvim_buf_get_lines(buf, 0, -1, false), plan_view.render(plan))
  vim.api.nvim_win_close(win, true)
end)

test("the plan is in the statusline and in a finished turn's line", function()
  eq(ext.format_status({ session = "2026-abcd", context_tokens = 1200, cache_hit_share = 0.5, plan = plan }), "agent abcd 1.2k ctx 50% cached plan 1/3")
  eq(ext.format_status({ session = "2026-abcd", context_tokens = vim.NIL, cache_hit_share = vim.NIL, plan = vim.NIL }), "agent abcd")
  eq(ext.describe_turn({ outcome = "answered", steps = 4, plan = plan }), "agent-lsp: answered in 4 steps; 2 plan items are still open")
  eq(ext.describe_turn({ outcome = "answered", steps = 4, plan = { items = {}, open = 0 } }), "agent-lsp: answered in 4 steps")
  eq(ext.plan_summary({ items = { { text = "Ship", status = "pending" } }, open = 1 }), "0/1 done, next: Ship")
end)

test("the context view groups segments by role with token sums", function()
  local lines, segments = context.render({
    segments = {
      { id = 1, role = "system", source = "preset standard", tokens = 1200, preview = "You are a coding agent", referenced = false },
      { id = 2, role = "user", source = "turn 1 prompt", tokens = 40, preview = "What does\n@src/app.py   do?", referenced = true },
      { id = 3, role = "tool", source = "read src/app.py", tokens = 900, preview = "count = 1", referenced = true },
      { id = 4, role = "user", source = "turn 2 prompt", tokens = 12, preview = "And then?" },
    },
    totals = { tokens = 2152 },
  })
  eq(lines, {
    "# Context: 4 segments, 2.2k tokens",
    "",
    "## system (1, 1.2k tokens)",
    "-   1.2k  preset standard  You are a coding agent",
    "",
    "## user (2, 52 tokens)",
    "*     40  turn 1 prompt  What does @src/app.py do?",
    "-     12  turn 2 prompt  And then?",
    "",
    "## tool (1, 900 tokens)",
    "*    900  read src/app.py  count = 1",
  })
  eq(segments[7].id, 2)
  eq(context.render({ segments = {} }), { "The context is empty: ask the agent something first." })
end)

test("cmd is the whole command; the old form without serve still works, with a note", function()
  local warned = {}
  local warn = function(message)
    table.insert(warned, message)
  end
  eq(ext.server_command({ "agent-lsp", "serve" }, warn), { "agent-lsp", "serve" })
  eq(ext.server_command({ "/opt/agent-lsp", "--workspace", "/w", "serve", "--stdio" }, warn),
    { "/opt/agent-lsp", "--workspace", "/w", "serve", "--stdio" })
  eq(#warned, 0)
  eq(ext.server_command({ "/opt/agent-lsp" }, warn), { "/opt/agent-lsp", "serve" })
  eq(#warned, 1)
  assert(warned[1]:find('cmd = { "/opt/agent-lsp", "serve" }', 1, true), warned[1])
  -- A binary that happens to be called `serve` is not the subcommand.
  eq(ext.server_command({ "serve" }, warn), { "serve", "serve" })
end)

test("setup options: lists replace the defaults", function()
  local plugin = require("agent_lsp")
  plugin.setup({ cmd = { "/opt/agent-lsp", "serve" }, root_markers = { ".hg" }, model = "m", api_key = function() return "k" end })
  local config = plugin.config(0)
  eq(config.cmd, { "/opt/agent-lsp", "serve" })
  eq(plugin.options.root_markers, { ".hg" })
  eq(config.init_options, { model = "m", apiKey = "k" })
  eq(config.name, "agent_lsp")
end)

test("the user commands exist", function()
  vim.cmd.runtime("plugin/agent_lsp.lua")
  local commands = vim.api.nvim_get_commands({})
  for _, name in ipairs({ "AgentAsk", "AgentSend", "AgentFix", "AgentCancel", "AgentCompact", "AgentContext", "AgentPlan", "AgentGoal", "AgentActivity" }) do
    if not commands[name] then
      error("missing :" .. name)
    end
  end
end)

test("the memory float lists each memory with its scope and where it came from", function()
  local result = {
    memories = {
      { id = "w1", scope = "workspace", text = "Run make check\nbefore pushing", provenance = { session = "20261201-180620-bb05", seq = 17, time = "2026-12-01T18:06:20Z" } },
      { id = "u1", scope = "user", text = "Answer briefly", provenance = { session = "cli", time = "2026-12-01T18:07:00Z" } },
    },
    caps = { max_per_scope = 100 },
  }
  eq(memory_view.render(result), {
    "w1 (workspace) Run make check",
    "    before pushing",
    "    from session 20261201-180620-bb05 event 17, 2026-12-01T18:06:20Z",
    "u1 (user) Answer briefly",
    "    from cli, 2026-12-01T18:07:00Z",
    "",
    ":AgentMemory forget {id} drops one; :AgentMemory edit {id} {text} changes it.",
  })
  eq(memory_view.render({ memories = {} }), { "No memories: the agent keeps them with its memory tool, or :AgentMemory remember {text}." })
  local buf, win = memory_view.show(result)
  eq(vim.api.nvim_win_get_config(win).relative, "editor")
  eq(vim.api.nvim_buf_get_lines(buf, 0, -1, false), memory_view.render(result))
  vim.api.nvim_win_close(win, true)
end)

local activity = {
  { id = "job-1@100", kind = "job", title = "cargo build", started_ms = 1, detail = "Finished", outcome = "exit 0", cancellable = false },
  { id = "child-1", kind = "subagent", title = "explore: find the parser", started_ms = 2, detail = "step 3", cancellable = true },
  { id = "job-1@200", kind = "job", title = "cargo test", parent = "child-1", started_ms = 3, detail = "", cancellable = true },
  { id = "job-2@300", kind = "job", title = "sleep 30", started_ms = 4, detail = "", outcome = vim.NIL, cancellable = true },
}

test("the activity float lists entries newest first, each under its parent", function()
  local lines, ids = activity_view.render(activity)
  eq(lines, {
    "[running] job: sleep 30",
    "[running] sub-agent: explore: find the parser — step 3",
    "  [running] job: cargo test",
    "[exit 0] job: cargo build — Finished",
    "",
    "x stops the entry under the cursor, r refreshes, q closes.",
  })
  eq(ids, { "job-2@300", "child-1", "job-1@200", "job-1@100" })
  eq(activity_view.render({}), { "Nothing running: background jobs the agent starts and its sub-agents show here." })
  eq(activity_view.render(vim.NIL), { "Nothing running: background jobs the agent starts and its sub-agents show here." })
end)

test("x in the activity float stops the entry under the cursor and shows the new list", function()
  local stopped = {}
  local after = vim.deepcopy(activity)
  after[3].outcome = "killed"
  local buf, win = activity_view.show(activity, {
    cancel = function(id, done)
      table.insert(stopped, id)
      done(after)
    end,
    fetch = function(done)
      done(nil)
    end,
  })
  vim.api.nvim_win_set_cursor(win, { 3, 0 })
  vim.api.nvim_feedkeys("x", "x", false)
  eq(stopped, { "job-1@200" })
  eq(vim.api.nvim_buf_get_lines(buf, 2, 3, false), { "  [killed] job: cargo test" })
  -- A line without an entry stops nothing; `r` with nothing new leaves the lines.
  vim.api.nvim_win_set_cursor(win, { 5, 0 })
  vim.api.nvim_feedkeys("xr", "x", false)
  eq(stopped, { "job-1@200" })
  eq(vim.api.nvim_buf_get_lines(buf, 0, -1, false), (activity_view.render(after)))
  vim.api.nvim_win_close(win, true)
end)

test("ghost text leaves out what is typed and what the range keeps after the cursor", function()
  local item = function(text, start_col, end_col)
    return { text = text, start_row = 0, start_col = start_col, end_row = 0, end_col = end_col }
  end
  -- At the cursor: the whole text.
  eq(inline.ghost("x = f(", item("1, 2)", 6, 6), 6), { first = "1, 2)", more = {} })
  -- The range starts before the cursor: the typed part is not drawn again.
  eq(inline.ghost("x = f(1", item("1, 2)", 6, 6), 7), { first = ", 2)", more = {} })
  -- The range replaces `)` after the cursor, which the text repeats: drawn once, by the line.
  eq(inline.ghost("x = f()", item("1, 2)", 6, 7), 6), { first = "1, 2", more = {} })
  -- Further lines go below.
  eq(inline.ghost("def f():", item("\n    return 1", 8, 8), 8), { first = "", more = { "    return 1" } })
  -- Text that does not continue what was typed is not shown.
  eq(inline.ghost("x = g", item("f()", 4, 4), 5), nil)
end)

test(":AgentRewind's arguments and messages", function()
  eq(rewind.parse(""), { force = false, undo = false })
  eq(rewind.parse("2 files force"), { turn = 2, scope = "files", force = true, undo = false })
  eq(rewind.parse("undo"), { force = false, undo = true })
  eq(rewind.parse("last both"), { scope = "both", last = true, force = false, undo = false })
  eq(select(2, rewind.parse("sideways")), "usage: :AgentRewind [N|last] [files|context|both] [force] | :AgentRewind undo")
  eq(
    ext.rewind_turn_label({ turn = 3, prompt = "Fix it", files = { { "a.py", "edit" }, { "b", "command" } } }),
    "turn 3: Fix it — a.py (edit), b (command)"
  )
  eq(ext.rewind_turn_label({ turn = 1, prompt = "Hi", files = {}, rewound = true }), "turn 1: Hi — no files [taken back]")
  eq(
    ext.describe_rewind({
      turn = 2,
      last_turn = 3,
      outcome = "partial",
      plan = { { "a.py", "restore" } },
      conflicts = { { path = "b.py", why = "unsaved changes in the editor" } },
      context_edit = "edit-9",
    }),
    "rewind of turns 2–3: partial\n  restored a.py (restore)\n  kept b.py: unsaved changes in the editor\n  conversation taken back"
  )
end)

io.stdout:write(string.format("%d passed, %d failed\n", passed, failed))
io.stdout:flush()
os.exit(failed == 0 and 0 or 1)
