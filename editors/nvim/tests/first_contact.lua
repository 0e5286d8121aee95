-- What a new user meets first, in a real headless Neovim against `agent-lsp serve` (run by
-- tests/e2e/editors.rs, which owns the loopback model endpoint and reads the JSON this writes).
-- AGENT_TEST_MODE = "model": `cmd` as the whole command, a folder completed inside a quoted
-- mention, an answer streamed into the chat document (its states while it streams, its final
-- text, what `:messages` shows), and the server's log lines in Neovim's LSP log.
-- AGENT_TEST_MODE = "no_model": the older `cmd` form, and `:AgentAsk` without a model.
-- AGENT_TEST_MODE = "prompt_first": a prompt document as the first buffer, `@` typed with
-- Neovim's default `completeopt`, a quoted folder chosen and completed inside, `:checkhealth`.
-- Environment as for e2e.lua: AGENT_TEST_SERVER, AGENT_TEST_ROOT, AGENT_TEST_BASE_URL,
-- AGENT_TEST_RESULTS. Run with `nvim --headless --clean -c "luafile tests/first_contact.lua"`.
-- Every wait is bounded; a step that times out records what it saw and the script goes on.

local plugin_root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h")
vim.opt.rtp:prepend(plugin_root)
vim.cmd.runtime("plugin/agent_lsp.lua")

local root = assert(vim.env.AGENT_TEST_ROOT)
local server = assert(vim.env.AGENT_TEST_SERVER)
local mode = assert(vim.env.AGENT_TEST_MODE)
local results = { steps = {}, notifications = {} }
local WAIT = 30000

local function step(name)
  table.insert(results.steps, name)
end

local function write_results()
  local file = assert(io.open(assert(vim.env.AGENT_TEST_RESULTS), "w"))
  file:write(vim.json.encode(results))
  file:close()
end

-- Everything shown to the user through vim.notify (the plugin's messages and the server's
-- window/showMessage both end there).
local notify = vim.notify
vim.notify = function(message, level, opts)
  table.insert(results.notifications, { message = message, level = level })
  return notify(message, level, opts)
end

local turns = {}
vim.api.nvim_create_autocmd("User", {
  pattern = "AgentTurnDone",
  callback = function(args)
    table.insert(turns, { command = args.data.command, result = args.data.result, error = args.data.error })
  end,
})

local function attached(buf)
  return vim.wait(WAIT, function()
    local client = require("agent_lsp").client(buf)
    return client ~= nil and client.initialized ~= false and #vim.lsp.get_clients({ bufnr = buf }) > 0
  end, 20)
end

--- Type `keys` in Insert mode at the end of the current line, then run `steps` in turn: each
--- waits until its `ready()` holds, then its `act()` returns the keys to type next (nil: none).
--- Insert mode ends after the last step, or when a step waits too long.
local function in_insert_mode(keys, steps)
  local deadline = vim.uv.now() + WAIT
  local timer = vim.uv.new_timer()
  local next_step = 1
  timer:start(20, 20, vim.schedule_wrap(function()
    local current = steps[next_step]
    if current and current.ready() then
      next_step = next_step + 1
      local typed = current.act()
      if typed then
        vim.api.nvim_input(typed)
      end
    end
    if next_step > #steps or vim.uv.now() > deadline then
      timer:stop()
      vim.api.nvim_input("<Esc>")
    end
  end))
  vim.api.nvim_feedkeys(vim.keycode(keys), "x!", false)
  if not timer:is_closing() then
    timer:close()
  end
end

local function model_mode()
  vim.lsp.set_log_level("info")
  local agent = require("agent_lsp")
  agent.setup({
    cmd = { server, "serve" },
    base_url = assert(vim.env.AGENT_TEST_BASE_URL),
    api_key = "sk-test",
    model = "deepseek-v4-flash",
  })

  step("attach")
  vim.cmd.edit(vim.fs.joinpath(root, "app.py"))
  results.attached = attached(0)
  results.cmd = agent.client(0) and agent.client(0).config.cmd

  -- A folder chosen inside a quoted mention keeps the mention open, and the next completion
  -- offers what is in it.
  step("folder completion")
  vim.cmd.edit(vim.fs.joinpath(root, "notes.agent.md"))
  local notes = vim.api.nvim_get_current_buf()
  results.notes_attached = attached(notes)
  vim.api.nvim_buf_set_lines(notes, 0, -1, false, { 'See @"docs with' })
  vim.o.completeopt = "menu,menuone,noselect"
  local rounds = {}
  local ask = "<Cmd>lua vim.lsp.completion.get()<CR>"
  local function menu_shown()
    return #vim.fn.complete_info({ "items" }).items > 0
  end
  -- What accepting an item inserts: the server's edit (Neovim shows the text up to its first
  -- space as the item's word).
  local function record()
    local words = vim.tbl_map(function(item)
      local lsp = vim.tbl_get(item, "user_data", "nvim", "lsp", "completion_item")
      return lsp and lsp.textEdit and lsp.textEdit.newText or item.word
    end, vim.fn.complete_info({ "items" }).items)
    table.insert(rounds, { words = words, line = vim.api.nvim_get_current_line(), col = vim.api.nvim_win_get_cursor(0)[2] })
    return words
  end
  in_insert_mode("A" .. ask, {
    {
      ready = menu_shown,
      act = function()
        -- Choose the folder.
        for index, word in ipairs(record()) do
          if word:find("/%$0\"$") or word:sub(-1) == "/" then
            return string.rep("<C-n>", index) .. "<C-y>"
          end
        end
      end,
    },
    {
      -- Accepted and applied: the menu opens again inside the folder by itself.
      ready = function()
        return menu_shown() and vim.api.nvim_get_current_line():find("spaces/", 1, true) ~= nil
      end,
      act = function() record() end,
    },
  })
  results.completion_rounds = rounds
  results.line_after_completion = vim.api.nvim_buf_get_lines(notes, 0, 1, false)[1]

  -- :AgentAsk: the answer streams into the chat document.
  step("ask")
  vim.cmd("messages clear")
  local started = vim.uv.hrtime()
  vim.cmd("AgentAsk hello")
  local chat_path = vim.fs.joinpath(root, ".agent-lsp/chat.agent.md")
  local states, last = {}, nil
  results.ask_done = vim.wait(WAIT, function()
    local chat = vim.fn.bufnr(chat_path)
    if chat > 0 and vim.api.nvim_buf_is_loaded(chat) then
      local text = table.concat(vim.api.nvim_buf_get_lines(chat, 0, -1, false), "\n")
      if text ~= last then
        last = text
        table.insert(states, { ms = math.floor((vim.uv.hrtime() - started) / 1e6), bytes = #text })
      end
    end
    return #turns > 0
  end, 5)
  results.turn_ms = math.floor((vim.uv.hrtime() - started) / 1e6)
  results.turn = turns[1]
  results.states = states
  local chat = vim.fn.bufnr(chat_path)
  results.chat = chat > 0 and vim.api.nvim_buf_get_lines(chat, 0, -1, false) or {}
  results.messages = vim.fn.execute("messages")

  step("log")
  local log = io.open(vim.lsp.get_log_path(), "r")
  results.log = log and log:read("*a") or ""
  if log then
    log:close()
  end
end

--- The items of the menu shown: what accepting each inserts (the server's edit), and its label.
local function menu_items()
  return vim.tbl_map(function(item)
    local lsp = vim.tbl_get(item, "user_data", "nvim", "lsp", "completion_item") or {}
    return { text = lsp.textEdit and lsp.textEdit.newText or item.word, label = item.abbr }
  end, vim.fn.complete_info({ "items" }).items)
end

local function menu_shown()
  return #vim.fn.complete_info({ "items" }).items > 0
end

-- A prompt document as the first buffer (`nvim notes.agent.md`), Neovim's default
-- `completeopt`, and `@` typed: the menu opens by itself, nothing is inserted while typing on,
-- the document itself is not offered; a quoted folder chosen opens the menu inside it at once,
-- and the file chosen there closes the mention with one quote. Then `:checkhealth`.
local function prompt_first_mode()
  results.completeopt = vim.o.completeopt
  local agent = require("agent_lsp")
  agent.setup({ cmd = { server, "serve" } })

  step("attach")
  vim.cmd.edit(vim.fs.joinpath(root, "notes.agent.md"))
  local notes = vim.api.nvim_get_current_buf()
  results.attached = attached(notes)
  results.buffer_completeopt = vim.bo[notes].completeopt

  step("typing @")
  local rounds = {}
  local function record(name)
    table.insert(rounds, {
      name = name,
      items = menu_items(),
      line = vim.api.nvim_get_current_line(),
      col = vim.api.nvim_win_get_cursor(0)[2],
    })
  end
  local function line_is(text)
    return function()
      return vim.api.nvim_get_current_line() == text
    end
  end
  vim.api.nvim_buf_set_lines(notes, 0, -1, false, { "" })
  in_insert_mode("A", {
    { ready = function() return true end, act = function() return "@" end },
    { ready = menu_shown, act = function() record("@") return "cons" end },
    {
      ready = function()
        return line_is("@cons")() and menu_shown() and vim.tbl_contains(
          vim.tbl_map(function(item) return item.label end, menu_items()), "src/console.py")
      end,
      act = function() record("@cons") end,
    },
  })
  results.line_after_typing = vim.api.nvim_buf_get_lines(notes, 0, 1, false)[1]

  step("quoted folder")
  vim.api.nvim_buf_set_lines(notes, 0, -1, false, { "See " })
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  local function choose(label)
    for index, item in ipairs(menu_items()) do
      if item.label == label then
        return string.rep("<C-n>", index) .. "<C-y>"
      end
    end
  end
  local function offers(label)
    return function()
      return menu_shown() and vim.tbl_contains(vim.tbl_map(function(item) return item.label end, menu_items()), label)
    end
  end
  in_insert_mode("A", {
    { ready = function() return true end, act = function() return '@"docs' end },
    { ready = offers("docs with spaces/"), act = function() record("@\"docs") return choose("docs with spaces/") end },
    -- No key is typed here: the menu must open inside the folder by itself.
    { ready = offers("docs with spaces/guide.md"), act = function() record("inside") return "g" end },
    {
      ready = function()
        return vim.api.nvim_get_current_line():find("spaces/g", 1, true) ~= nil and offers("docs with spaces/guide.md")()
      end,
      act = function() record("inside g") return choose("docs with spaces/guide.md") end,
    },
    {
      ready = function()
        return not menu_shown() and vim.api.nvim_get_current_line():find("guide.md", 1, true) ~= nil
      end,
      act = function() end,
    },
  })
  results.completion_rounds = rounds
  results.line_after_folder = vim.api.nvim_buf_get_lines(notes, 0, 1, false)[1]

  step("checkhealth")
  -- The file agent-lsp would read is named, wherever AGENT_LSP_CONFIG points.
  vim.env.AGENT_LSP_CONFIG = vim.fs.joinpath(root, "elsewhere/agent-lsp.toml")
  vim.cmd("checkhealth agent_lsp")
  results.health = vim.api.nvim_buf_get_lines(0, 0, -1, false)
end

local function no_model_mode()
  local agent = require("agent_lsp")
  -- The form of older versions: `serve` is appended, with a note.
  agent.setup({ cmd = { server } })

  step("attach")
  vim.cmd.edit(vim.fs.joinpath(root, "app.py"))
  results.attached = attached(0)
  results.cmd = agent.client(0) and agent.client(0).config.cmd

  step("ask")
  vim.cmd("AgentAsk hello")
  results.ask_done = vim.wait(WAIT, function()
    return #turns > 0
  end, 20)
  results.turn = turns[1]
  results.chat_file_exists = vim.uv.fs_stat(vim.fs.joinpath(root, ".agent-lsp/chat.agent.md")) ~= nil
  results.chat_buffer = vim.fn.bufnr(vim.fs.joinpath(root, ".agent-lsp/chat.agent.md"))
end

local ok, err = xpcall(function()
  if mode == "model" then
    model_mode()
  elseif mode == "prompt_first" then
    prompt_first_mode()
  else
    no_model_mode()
  end
  step("done")
end, debug.traceback)
if not ok then
  results.error = err
end
write_results()
vim.cmd("qa!")
