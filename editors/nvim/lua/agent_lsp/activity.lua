-- `:AgentActivity`: the agent's background jobs and sub-agents, running and recently ended, from
-- the `activity` of an `agent.status` answer (`{{id, kind, title, parent?, started_ms, detail,
-- outcome?, cancellable}, ...}`), in the shared float. `x` on an entry stops it
-- (`agent.activity.cancel`: a job is killed with everything it started), `r` asks again.
-- `render` is pure, so tests/unit.lua checks it on sample data.

local ext = require("agent_lsp.ext")

local M = {}

local KINDS = { job = "job", subagent = "sub-agent", server = "language server" }

local function running(entry)
  return entry.outcome == nil or entry.outcome == vim.NIL
end

--- The float's lines, and for each line the id of the entry on it (nil for other lines): each
--- entry under the one it runs under (a sub-agent's jobs under the sub-agent), newest first.
function M.render(entries)
  entries = type(entries) == "table" and entries or {}
  if #entries == 0 then
    return { "Nothing running: background jobs the agent starts and its sub-agents show here." }, {}
  end
  local ids = {}
  for _, entry in ipairs(entries) do
    ids[entry.id] = true
  end
  local lines, line_ids = {}, {}
  local function add(parent, depth)
    for i = #entries, 1, -1 do
      local entry = entries[i]
      local under = type(entry.parent) == "string" and ids[entry.parent] and entry.parent or nil
      if under == parent then
        local state = running(entry) and "running" or tostring(entry.outcome)
        local line = string.format("%s[%s] %s: %s", string.rep("  ", depth), state, KINDS[entry.kind] or tostring(entry.kind), entry.title or "")
        if type(entry.detail) == "string" and entry.detail ~= "" then
          line = line .. " — " .. entry.detail
        end
        table.insert(lines, line)
        line_ids[#lines] = entry.id
        add(entry.id, depth + 1)
      end
    end
  end
  add(nil, 0)
  table.insert(lines, "")
  table.insert(lines, "x stops the entry under the cursor, r refreshes, q closes.")
  return lines, line_ids
end

--- Show `entries` in a float. `actions.cancel(id, done)` stops an entry and `actions.fetch(done)`
--- asks for the entries again; each calls `done(entries)` with the new list (nil: unchanged).
--- Returns the buffer and the window.
function M.show(entries, actions)
  local lines, line_ids = M.render(entries)
  local float = require("agent_lsp.float")
  local buf, win = float.open(lines, " agent activity ")
  local function redraw(new_entries)
    if new_entries ~= nil and vim.api.nvim_buf_is_valid(buf) then
      lines, line_ids = M.render(new_entries)
      float.set_lines(buf, win, lines)
    end
  end
  vim.keymap.set("n", "x", function()
    local id = line_ids[vim.api.nvim_win_get_cursor(0)[1]]
    if id then
      actions.cancel(id, redraw)
    end
  end, { buffer = buf, nowait = true, desc = "Stop the job or sub-agent under the cursor" })
  vim.keymap.set("n", "r", function()
    actions.fetch(redraw)
  end, { buffer = buf, nowait = true, desc = "Refresh the agent's activity" })
  return buf, win
end

--- `:AgentActivity` for the plugin `agent` (`require("agent_lsp")`): fetch the status, then show
--- its activity (and call `opts.on_done(buf, win)`); a stop asks for the status again once the
--- server answered.
function M.open(agent, opts)
  local function notify(message, level)
    vim.notify(message, level or vim.log.levels.INFO, { title = "agent-lsp" })
  end
  local function fetch(done)
    return agent.execute(ext.commands.status, nil, function(err, result)
      if err then
        notify(err.message, vim.log.levels.ERROR)
      else
        agent.status = result
        done(type(result) == "table" and result.activity or {})
      end
    end)
  end
  local actions = {
    fetch = fetch,
    cancel = function(id, done)
      agent.execute(ext.commands.activity_cancel, { id = id }, function(err, result)
        if err then
          notify(err.message, vim.log.levels.ERROR)
          return
        end
        if type(result) == "table" and not result.cancelled then
          notify(id .. " is not running")
        end
        fetch(done)
      end)
    end,
  }
  return fetch(function(entries)
    local buf, win = M.show(entries, actions)
    if opts.on_done then
      opts.on_done(buf, win)
    end
  end)
end

return M
