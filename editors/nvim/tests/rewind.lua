-- :AgentRewind in a real headless Neovim against `agent-lsp serve` (run by tests/e2e/editors.rs,
-- which owns the loopback model endpoint and reads the JSON this writes): a turn edits the open
-- buffer notes.txt and runs a command that changes script.txt on disk; :AgentRewind, choosing
-- with vim.ui.select as a user would, takes both back, the buffer through the editor (so `u`
-- brings the agent's text back) and the disk file on disk.
-- Environment: AGENT_TEST_SERVER, AGENT_TEST_ROOT, AGENT_TEST_BASE_URL, AGENT_TEST_RESULTS.
local plugin_root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h")
vim.opt.rtp:prepend(plugin_root)
vim.cmd.runtime("plugin/agent_lsp.lua")

local root = assert(vim.env.AGENT_TEST_ROOT)
local results = { steps = {}, prompts = {} }
local WAIT = 30000

local function write_results()
  local file = assert(io.open(assert(vim.env.AGENT_TEST_RESULTS), "w"))
  file:write(vim.json.encode(results))
  file:close()
end

local function read(path)
  local file = io.open(vim.fs.joinpath(root, path))
  if not file then
    return vim.NIL
  end
  local text = file:read("a")
  file:close()
  return text
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
  table.insert(results.steps, "open")
  vim.cmd.edit(vim.fs.joinpath(root, "notes.txt"))
  local notes = vim.api.nvim_get_current_buf()
  results.attached = vim.wait(WAIT, function()
    return agent.client(notes) ~= nil and agent.client(notes).initialized ~= false
  end, 50)

  table.insert(results.steps, "turn")
  local answered
  agent.ask({ args = "Change the notes", on_done = function(err, result)
    answered = err or result
  end })
  vim.wait(WAIT, function()
    return answered ~= nil
  end, 20)
  results.turn = answered
  results.after_turn = vim.api.nvim_buf_get_lines(notes, 0, -1, false)
  results.script_after_turn = read("script.txt")
  -- A user's keystrokes close the undo block between the turn and the rewind; a script must
  -- close it itself (setting 'undolevels' to its own value does, `:help undo-break`).
  vim.bo[notes].undolevels = vim.bo[notes].undolevels

  -- The user picks the turn and "Files only" in the menus, as they would with the keyboard.
  table.insert(results.steps, "rewind")
  vim.ui.select = function(items, opts, on_choice)
    table.insert(results.prompts, { prompt = opts.prompt, items = vim.tbl_map(opts.format_item or tostring, items) })
    local choice = items[1]
    for _, item in ipairs(items) do
      if item == "files" then
        choice = item
      end
    end
    on_choice(choice)
  end
  local report
  vim.cmd.buffer(notes)
  agent.rewind({ args = "", on_done = function(err, result)
    report = err or result
  end })
  vim.wait(WAIT, function()
    return report ~= nil
  end, 20)
  results.report = report
  results.after_rewind = vim.api.nvim_buf_get_lines(notes, 0, -1, false)
  results.script_after_rewind = read("script.txt")
  results.notes_on_disk = read("notes.txt")
  vim.api.nvim_buf_call(notes, function()
    vim.cmd("silent undo")
  end)
  results.after_undo_key = vim.api.nvim_buf_get_lines(notes, 0, -1, false)
  table.insert(results.steps, "done")
end

local ok, err = xpcall(main, debug.traceback)
if not ok then
  results.error = err
end
write_results()
vim.cmd("qa!")
