-- Drives the plugin in a real headless Neovim against `agent-lsp serve` (run by
-- tests/e2e/editors.rs, which owns the loopback model endpoint and reads the JSON this writes).
-- Environment: AGENT_TEST_SERVER (the agent-lsp binary), AGENT_TEST_ROOT (the workspace),
-- AGENT_TEST_BASE_URL (the model endpoint), AGENT_TEST_RESULTS (where the JSON goes),
-- AGENT_TEST_CANCEL_FLAG (a file the test creates once the model has the request to cancel).
-- Run with `nvim --headless --clean -c "luafile tests/e2e.lua"`: `-l` would end Neovim once the
-- keys typed into Insert mode run out.
-- Every wait is bounded; a step that times out records what it saw and the script goes on.

local plugin_root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h")
vim.opt.rtp:prepend(plugin_root)
vim.cmd.runtime("plugin/agent_lsp.lua")

local root = assert(vim.env.AGENT_TEST_ROOT)
local results = { steps = {} }
local WAIT = 30000

local function step(name)
  table.insert(results.steps, name)
end

local function write_results()
  local file = assert(io.open(assert(vim.env.AGENT_TEST_RESULTS), "w"))
  file:write(vim.json.encode(results))
  file:close()
end

local turns = {}
vim.api.nvim_create_autocmd("User", {
  pattern = "AgentTurnDone",
  callback = function(args)
    table.insert(turns, { command = args.data.command, result = args.data.result, error = args.data.error })
  end,
})
local progress = {}
vim.api.nvim_create_autocmd("LspProgress", {
  callback = function(args)
    local value = args.data.params.value
    table.insert(progress, { kind = value.kind, title = value.title, message = value.message, cancellable = value.cancellable })
  end,
})
local function turn_done(command, count)
  local n = 0
  for _, turn in ipairs(turns) do
    if turn.command == command then
      n = n + 1
      if n == count then
        return turn
      end
    end
  end
end

local function errors(buf)
  return vim.diagnostic.get(buf, { severity = vim.diagnostic.severity.ERROR })
end

local function main()
  local agent = require("agent_lsp")
  agent.setup({
    cmd = { assert(vim.env.AGENT_TEST_SERVER) },
    base_url = vim.env.AGENT_TEST_BASE_URL,
    api_key = "sk-test",
    model = "deepseek-v4-flash",
    preset = "standard",
  })

  -- Go to definition through the broker (pyright behind agent-lsp).
  step("open")
  vim.cmd.edit(vim.fs.joinpath(root, "app.py"))
  local app = vim.api.nvim_get_current_buf()
  results.attached = vim.wait(WAIT, function()
    return agent.client(app) ~= nil and agent.client(app).initialized ~= false
  end, 50)
  results.diagnostics_before = vim.wait(WAIT, function()
    return #errors(app) > 0
  end, 50)
  results.errors_before = vim.tbl_map(function(d)
    return d.message
  end, errors(app))

  step("definition")
  local jumped = false
  for _ = 1, 10 do
    vim.api.nvim_set_current_buf(app)
    vim.api.nvim_win_set_cursor(0, { 4, 1 })
    vim.lsp.buf.definition()
    jumped = vim.wait(5000, function()
      return vim.api.nvim_get_current_buf() ~= app or vim.api.nvim_win_get_cursor(0)[1] ~= 4
    end, 20)
    if jumped then
      break
    end
  end
  results.definition = {
    file = vim.fn.fnamemodify(vim.api.nvim_buf_get_name(0), ":t"),
    line = vim.api.nvim_win_get_cursor(0)[1],
  }

  -- Fix with agent: offered as a code action, run with :AgentFix, edits the buffer.
  step("fix")
  vim.api.nvim_set_current_buf(app)
  vim.api.nvim_win_set_cursor(0, { 3, 7 })
  local line_diagnostics = vim.tbl_map(function(d)
    return d.user_data.lsp
  end, vim.diagnostic.get(app, { lnum = 2 }))
  local answers = vim.lsp.buf_request_sync(app, "textDocument/codeAction", {
    textDocument = { uri = vim.uri_from_bufnr(app) },
    range = { start = { line = 2, character = 7 }, ["end"] = { line = 2, character = 7 } },
    context = { diagnostics = line_diagnostics },
  }, WAIT)
  results.code_actions = {}
  for _, answer in pairs(answers or {}) do
    for _, action in ipairs(answer.result or {}) do
      table.insert(results.code_actions, action.title)
    end
  end
  vim.cmd("AgentFix")
  results.fix_done = vim.wait(WAIT, function()
    return turn_done("agent.fix", 1) ~= nil
  end, 50)
  results.fix = turn_done("agent.fix", 1)
  results.app_after_fix = vim.api.nvim_buf_get_lines(app, 0, -1, false)
  results.app_modified = vim.bo[app].modified

  -- @path completion with the built-in omnifunc in a prompt document.
  step("completion")
  vim.cmd.edit(vim.fs.joinpath(root, "notes.agent.md"))
  local notes = vim.api.nvim_get_current_buf()
  results.notes_attached = vim.wait(WAIT, function()
    return agent.client(notes) ~= nil and #vim.lsp.get_clients({ bufnr = notes }) > 0
  end, 50)
  results.omnifunc = vim.bo[notes].omnifunc
  local deadline = vim.uv.now() + WAIT
  local timer = vim.uv.new_timer()
  timer:start(50, 50, vim.schedule_wrap(function()
    local info = vim.fn.complete_info({ "items", "pum_visible" })
    if #info.items > 0 or vim.uv.now() > deadline then
      results.completion = vim.tbl_map(function(item)
        return item.word
      end, info.items)
      timer:stop()
      vim.api.nvim_input("<Esc>")
    end
  end))
  vim.api.nvim_feedkeys(vim.keycode("A<C-x><C-o>"), "x!", false)
  if not timer:is_closing() then
    timer:close()
  end

  -- :AgentCancel stops a running turn (the model never answers this one).
  step("cancel")
  vim.cmd("AgentAsk Explain @app.py please")
  results.model_busy = vim.wait(WAIT, function()
    return vim.uv.fs_stat(vim.env.AGENT_TEST_CANCEL_FLAG) ~= nil
  end, 50)
  results.running_while_busy = #vim.tbl_filter(function(p)
    return p.kind == "begin"
  end, progress) >= 2
  vim.cmd("AgentCancel")
  results.cancel_done = vim.wait(WAIT, function()
    return turn_done("agent.ask", 1) ~= nil
  end, 50)
  results.cancel = turn_done("agent.ask", 1)
  local chat = vim.fn.bufnr(vim.fs.joinpath(root, ".agent-lsp/chat.agent.md"))
  results.chat = chat > 0 and vim.api.nvim_buf_get_lines(chat, 0, -1, false) or {}

  -- :AgentContext answers or says the server has no context view, without an error.
  step("context")
  local context_answer
  agent.context({
    on_done = function(err, result)
      context_answer = { unknown = require("agent_lsp.ext").is_unknown_command(err), error = err and err.message, result = result }
    end,
  })
  vim.wait(WAIT, function()
    return context_answer ~= nil
  end, 20)
  results.context = context_answer
  if context_answer and type(context_answer.result) == "table" then
    results.context_lines = (require("agent_lsp.context").render(context_answer.result))
  end
  local ok, err = pcall(vim.cmd, "AgentContext")
  results.context_command_ok = ok
  results.context_command_error = not ok and tostring(err) or nil

  step("status")
  agent.status = nil
  agent.refresh_status()
  vim.wait(WAIT, function()
    return agent.status ~= nil
  end, 20)
  results.status = agent.status
  results.statusline = agent.statusline()
  results.progress = progress

  -- :AgentPlan shows the plan the fix turn's model wrote, in a float.
  step("plan")
  local function float_lines()
    for _, win in ipairs(vim.api.nvim_list_wins()) do
      if vim.api.nvim_win_get_config(win).relative ~= "" then
        return vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false), win
      end
    end
  end
  vim.cmd("AgentPlan")
  vim.wait(WAIT, function()
    return float_lines() ~= nil
  end, 20)
  local lines, win = float_lines()
  results.plan_float = lines
  if win then
    vim.api.nvim_win_close(win, true)
  end

  -- :AgentActivity lists a background job (started with :AgentTool, `shell` asks: allowed here),
  -- and `x` on its line stops it.
  step("activity")
  vim.lsp.handlers["window/showMessageRequest"] = function()
    return { title = "Allow" }
  end
  local started
  agent.tool({ args = 'shell {"command": "sleep 30", "background": true}', on_done = function(err, result)
    started = err or result
  end })
  vim.wait(WAIT, function()
    return started ~= nil
  end, 20)
  results.job_started = started
  vim.cmd("AgentActivity")
  local function job_line(state)
    local lines = float_lines() or {}
    for i, line in ipairs(lines) do
      if line == "[" .. state .. "] job: sleep 30" then
        return i
      end
    end
  end
  vim.wait(WAIT, function()
    return job_line("running") ~= nil
  end, 20)
  results.activity_float = float_lines()
  local row = job_line("running")
  if row then
    local _, float = float_lines()
    vim.api.nvim_set_current_win(float)
    vim.api.nvim_win_set_cursor(float, { row, 0 })
    vim.api.nvim_feedkeys("x", "x", false)
    -- The kill takes its moment after the server answered: `r` asks again until it shows.
    results.activity_stopped = vim.wait(WAIT, function()
      if job_line("killed") then
        return true
      end
      vim.api.nvim_feedkeys("r", "x", false)
      return false
    end, 200)
    vim.api.nvim_win_close(float, true)
  end

  step("health")
  vim.cmd("checkhealth agent_lsp")
  results.health = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  step("done")
end

local ok, err = xpcall(main, debug.traceback)
if not ok then
  results.error = err
end
write_results()
vim.cmd("qa!")
