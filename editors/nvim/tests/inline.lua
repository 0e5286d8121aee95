-- Inline completion in a real headless Neovim against `agent-lsp serve` (run by
-- tests/e2e/editors.rs, which owns the loopback endpoint's FIM route and reads the JSON this
-- writes): typing in Insert mode shows the server's suggestion as ghost text (an extmark with
-- inline virtual text), Tab accepts it, the next suggestion is dismissed with <C-]>.
-- Environment: AGENT_TEST_SERVER, AGENT_TEST_ROOT, AGENT_TEST_RESULTS.
-- Run with `nvim --headless --clean -c "luafile tests/inline.lua"` (keys are typed in Insert mode).

local plugin_root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h")
vim.opt.rtp:prepend(plugin_root)
vim.cmd.runtime("plugin/agent_lsp.lua")

local root = assert(vim.env.AGENT_TEST_ROOT)
local results = { steps = {} }
local WAIT = 30000

local function write_results()
  local file = assert(io.open(assert(vim.env.AGENT_TEST_RESULTS), "w"))
  file:write(vim.json.encode(results))
  file:close()
end

local function finish()
  write_results()
  vim.cmd("qa!")
end

local inline = require("agent_lsp.inline")

--- The ghost text drawn in `buf`: the inline virtual text of the plugin's extmarks.
local function ghost(buf)
  local texts = {}
  for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(buf, inline.namespace, 0, -1, { details = true })) do
    local details = mark[4]
    for _, chunk in ipairs(details.virt_text or {}) do
      table.insert(texts, { text = chunk[1], hl = chunk[2], row = mark[2], col = mark[3], pos = details.virt_text_pos })
    end
  end
  return texts
end

local function main()
  local agent = require("agent_lsp")
  agent.setup({ cmd = { assert(vim.env.AGENT_TEST_SERVER) }, inline_completion = { debounce_ms = 20 } })
  vim.cmd.edit(vim.fs.joinpath(root, "app.py"))
  local app = vim.api.nvim_get_current_buf()
  results.attached = vim.wait(WAIT, function()
    local client = agent.client(app)
    return client ~= nil and client.initialized ~= false and inline.current(app) == nil
      and (client.server_capabilities or {}).inlineCompletionProvider ~= nil
  end, 50)
  -- pyright has analysed the file (its diagnostics came), so the server can ground requests.
  results.analysed = vim.wait(WAIT, function()
    return #vim.diagnostic.get(app) > 0
  end, 50)
  table.insert(results.steps, "type")
  vim.api.nvim_win_set_cursor(0, { 3, 0 })
  local phase = "waiting for the ghost text"
  local deadline = vim.uv.now() + WAIT
  local timer = vim.uv.new_timer()
  timer:start(50, 50, vim.schedule_wrap(function()
    if vim.uv.now() > deadline then
      results.timed_out = phase
      timer:stop()
      vim.api.nvim_input("<Esc>")
      return
    end
    if phase == "waiting for the ghost text" then
      local shown = ghost(app)
      if #shown > 0 then
        results.ghost = shown
        results.line_with_ghost = vim.api.nvim_get_current_line()
        results.mode_with_ghost = vim.fn.mode()
        phase = "accepting"
        vim.api.nvim_input("<Tab>")
      end
    elseif phase == "accepting" then
      -- (The accepted text is a change, so the next suggestion may already be on its way.)
      if vim.api.nvim_get_current_line() ~= results.line_with_ghost then
        results.accepted_line = vim.api.nvim_get_current_line()
        results.cursor_after_accept = vim.api.nvim_win_get_cursor(0)
        table.insert(results.steps, "accepted")
        -- A new line: the next suggestion comes, and <C-]> dismisses it.
        phase = "waiting for the second ghost text"
        vim.api.nvim_input("<CR>total = rectangle_area(")
      end
    elseif phase == "waiting for the second ghost text" then
      local shown = ghost(app)
      if #shown > 0 and shown[1].row == 3 then
        results.second_ghost = ghost(app)
        phase = "dismissing"
        vim.api.nvim_input("<C-]>")
      end
    elseif phase == "dismissing" then
      if #ghost(app) == 0 then
        results.dismissed_line = vim.api.nvim_get_current_line()
        table.insert(results.steps, "dismissed")
        timer:stop()
        vim.api.nvim_input("<Esc>")
      end
    end
  end))
  vim.api.nvim_feedkeys("Aarea = rectangle_area(", "x!", false)
  if not timer:is_closing() then
    timer:close()
  end
  results.lines = vim.api.nvim_buf_get_lines(app, 0, -1, false)
  table.insert(results.steps, "done")
end

local ok, err = xpcall(main, debug.traceback)
if not ok then
  results.error = err
end
finish()
