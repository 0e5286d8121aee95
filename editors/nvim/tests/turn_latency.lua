-- Times chat turns as a Neovim user feels them: from `:AgentAsk` to the last change of the chat
-- document (the answer streamed in and the fresh `## you`), with the loopback model answering
-- at once. Run by tests/benches/chat_turn.rs, which owns the endpoint and reads the JSON this
-- writes. Environment: AGENT_TEST_SERVER, AGENT_TEST_ROOT, AGENT_TEST_BASE_URL,
-- AGENT_TEST_RESULTS, AGENT_TEST_TURNS (timed turns, after one warm-up turn).
-- Run with `nvim --headless --clean -l tests/turn_latency.lua`.

local plugin_root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h")
vim.opt.rtp:prepend(plugin_root)
vim.cmd.runtime("plugin/agent_lsp.lua")

local root = assert(vim.env.AGENT_TEST_ROOT)
local turns = tonumber(vim.env.AGENT_TEST_TURNS or "20")
local WAIT = 30000
local results = { turns = {} }

local done = 0
vim.api.nvim_create_autocmd("User", {
  pattern = "AgentTurnDone",
  callback = function()
    done = done + 1
  end,
})

local agent = require("agent_lsp")
agent.setup({
  cmd = { assert(vim.env.AGENT_TEST_SERVER) },
  base_url = vim.env.AGENT_TEST_BASE_URL,
  api_key = "sk-test",
  model = "deepseek-v4-flash",
  preset = "standard",
})

-- The chat document, open (so the answer streams into the buffer), with its edits timed.
local chat_path = vim.fs.joinpath(root, ".agent-lsp/chat.agent.md")
vim.fn.mkdir(vim.fs.dirname(chat_path), "p")
vim.cmd.edit(chat_path)
local chat = vim.api.nvim_get_current_buf()
results.attached = vim.wait(WAIT, function()
  return agent.client(chat) ~= nil and #vim.lsp.get_clients({ bufnr = chat }) > 0
end, 10)
local last_change
vim.api.nvim_buf_attach(chat, false, {
  on_lines = function()
    last_change = vim.uv.hrtime()
  end,
})

for n = 0, turns do
  local before = done
  last_change = nil
  local started = vim.uv.hrtime()
  vim.cmd("AgentAsk question " .. n)
  local finished = vim.wait(WAIT, function()
    return done > before
  end, 1)
  -- The last edit may follow the command's answer: wait until the document is still for 300 ms.
  local seen
  repeat
    seen = last_change
    vim.wait(300)
  until last_change == seen
  if n > 0 then
    table.insert(results.turns, {
      finished = finished,
      last_edit_ms = last_change and (last_change - started) / 1e6 or vim.NIL,
    })
  end
end
results.chat = vim.api.nvim_buf_get_lines(chat, 0, -1, false)

local file = assert(io.open(assert(vim.env.AGENT_TEST_RESULTS), "w"))
file:write(vim.json.encode(results))
file:close()
vim.cmd("qa!")
