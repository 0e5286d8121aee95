-- The agent-lsp commands this plugin sends (`workspace/executeCommand`), mirroring
-- agent-lsp/src/server/commands.rs, and pure helpers over their arguments and answers.
-- Nothing here touches the editor, so tests/unit.lua checks it without a server.

local M = {}

M.commands = {
  ask = "agent.ask",
  explain = "agent.explain",
  send = "agent.send",
  fix = "agent.fix",
  cancel = "agent.cancel",
  compact = "agent.compact",
  session_new = "agent.session.new",
  session_list = "agent.session.list",
  tool = "agent.tool",
  status = "agent.status",
  context_show = "agent.context.show",
  context_edit = "agent.context.edit",
  context_rollback = "agent.context.rollback",
  goal_set = "agent.goal.set",
  memory_list = "agent.memory.list",
  memory_remember = "agent.memory.remember",
  memory_forget = "agent.memory.forget",
  memory_edit = "agent.memory.edit",
  activity_cancel = "agent.activity.cancel",
  mcp_approve = "agent.mcp.approve",
  hooks_approve = "agent.hooks.approve",
  rewind_turns = "agent.rewind.turns",
  rewind = "agent.rewind",
  rewind_undo = "agent.rewind.undo",
}

--- Commands that run an agent turn (their answer comes when the turn ends).
M.turn_commands = {
  [M.commands.ask] = true,
  [M.commands.explain] = true,
  [M.commands.send] = true,
  [M.commands.fix] = true,
  [M.commands.compact] = true,
}

--- JSON-RPC's MethodNotFound: the server's answer to a command it does not know.
M.METHOD_NOT_FOUND = -32601

--- Whether an executeCommand error says the command is unknown to this server.
function M.is_unknown_command(err)
  if type(err) ~= "table" then
    return false
  end
  return err.code == M.METHOD_NOT_FOUND
    or (type(err.message) == "string" and err.message:lower():find("unknown command", 1, true) ~= nil)
end

--- The command that starts the server, from the `cmd` option: the whole command, as
--- `vim.lsp.config` and nvim-lspconfig take it (`{ "agent-lsp", "serve" }`). The older form
--- without `serve` (`{ "agent-lsp" }`, to which `serve` was appended) still works: `serve` is
--- appended and `warn` is called once with how to update. A function (an RPC connector) is
--- passed through.
function M.server_command(cmd, warn)
  if type(cmd) ~= "table" then
    return cmd
  end
  for i = 2, #cmd do
    if cmd[i] == "serve" then
      return vim.deepcopy(cmd)
    end
  end
  local fixed = vim.list_extend(vim.deepcopy(cmd), { "serve" })
  warn(string.format(
    "agent-lsp: `cmd` is the whole command now; `serve` was added for you. Write cmd = %s in your setup.",
    vim.inspect(fixed, { newline = " ", indent = "" })
  ))
  return fixed
end

--- `initializationOptions` from the setup options: camelCase, empty values left out; `nil` when
--- nothing is set (an empty Lua table would be sent as a JSON array).
function M.init_options(opts, api_key)
  local options = {}
  local function set(key, value)
    if type(value) == "string" and vim.trim(value) ~= "" then
      options[key] = vim.trim(value)
    end
  end
  set("model", opts.model)
  set("baseUrl", opts.base_url)
  set("preset", opts.preset)
  set("apiKey", api_key)
  if next(options) == nil then
    return nil
  end
  return options
end

local function before_or_at(a, b)
  return a.line < b.line or (a.line == b.line and a.character <= b.character)
end

--- The LSP diagnostic under `position` (0-based line/character): among those holding it, the
--- most severe, then the narrowest; else the nearest one on the cursor's line.
function M.diagnostic_at(diagnostics, position)
  local function severity(d)
    return d.severity or 1
  end
  local function width(d)
    return (d.range["end"].line - d.range.start.line) * 100000 + (d.range["end"].character - d.range.start.character)
  end
  local holding, on_line = {}, {}
  for _, d in ipairs(diagnostics) do
    if before_or_at(d.range.start, position) and before_or_at(position, d.range["end"]) then
      table.insert(holding, d)
    elseif d.range.start.line <= position.line and position.line <= d.range["end"].line then
      table.insert(on_line, d)
    end
  end
  if #holding > 0 then
    table.sort(holding, function(a, b)
      if severity(a) ~= severity(b) then
        return severity(a) < severity(b)
      end
      return width(a) < width(b)
    end)
    return holding[1]
  end
  local function distance(d)
    return math.min(
      math.abs(d.range.start.character - position.character),
      math.abs(d.range["end"].character - position.character)
    )
  end
  table.sort(on_line, function(a, b)
    if severity(a) ~= severity(b) then
      return severity(a) < severity(b)
    end
    return distance(a) < distance(b)
  end)
  return on_line[1]
end

--- The plan of an answer (`agent.status`, a turn's result), or nil: JSON null is `vim.NIL`.
function M.plan_of(value)
  if type(value) ~= "table" or type(value.plan) ~= "table" then
    return nil
  end
  return value.plan
end

local MARKS = { pending = "[ ]", in_progress = "[>]", done = "[x]" }

--- The checkbox of an item's status, as the server shows it to the model.
function M.plan_mark(status)
  return MARKS[status] or "[?]"
end

--- `2/5 done, now: Fix lex()` (or `next:` the first pending item), as the server says it.
function M.plan_summary(plan)
  local items = type(plan.items) == "table" and plan.items or {}
  local done, now, next_item = 0, nil, nil
  for _, item in ipairs(items) do
    if item.status == "done" then
      done = done + 1
    else
      if item.status == "in_progress" and not now then
        now = item
      end
      next_item = next_item or item
    end
  end
  local text = string.format("%d/%d done", done, #items)
  if now then
    text = text .. ", now: " .. now.text
  elseif next_item then
    text = text .. ", next: " .. next_item.text
  end
  return text
end

--- One line for a finished turn.
function M.describe_turn(result)
  if type(result) ~= "table" or not result.outcome then
    return "agent-lsp: done"
  end
  local steps = result.steps == 1 and "1 step" or string.format("%d steps", result.steps or 0)
  local changed = ""
  if type(result.changed) == "table" and #result.changed > 0 then
    changed = "; changed " .. table.concat(result.changed, ", ")
  end
  local plan = M.plan_of(result)
  local open = plan and type(plan.open) == "number" and plan.open or 0
  if open == 1 then
    changed = changed .. "; 1 plan item is still open"
  elseif open > 1 then
    changed = changed .. string.format("; %d plan items are still open", open)
  end
  if result.outcome == "answered" then
    return "agent-lsp: answered in " .. steps .. changed
  elseif result.outcome == "step_limit" then
    return "agent-lsp: stopped at the preset's step limit after " .. steps .. changed .. "; send again to continue"
  elseif result.outcome == "cancelled" then
    return "agent-lsp: cancelled after " .. steps .. changed
  end
  return "agent-lsp: " .. tostring(result.outcome)
end

--- `12345` → `12k`, like the VS Code status bar.
function M.compact_tokens(tokens)
  if tokens < 1000 then
    return tostring(tokens)
  elseif tokens < 10000 then
    return string.format("%.1fk", tokens / 1000)
  elseif tokens < 1000000 then
    return string.format("%.0fk", tokens / 1000)
  end
  return string.format("%.2fM", tokens / 1000000)
end

--- The statusline text of an `agent.status` answer.
function M.format_status(status)
  if type(status) ~= "table" then
    return "agent"
  end
  if status.running then
    return "agent: running"
  end
  local parts = { "agent" }
  if type(status.session) == "string" then
    table.insert(parts, status.session:sub(-4))
  end
  if type(status.context_tokens) == "number" then
    table.insert(parts, M.compact_tokens(status.context_tokens) .. " ctx")
  end
  if type(status.cache_hit_share) == "number" then
    table.insert(parts, string.format("%d%% cached", math.floor(status.cache_hit_share * 100 + 0.5)))
  end
  local plan = M.plan_of(status)
  if plan and type(plan.items) == "table" and #plan.items > 0 then
    table.insert(parts, string.format("plan %d/%d", #plan.items - (plan.open or 0), #plan.items))
  end
  return table.concat(parts, " ")
end

--- One line of the rewind menu for a turn of `agent.rewind.turns`: its number, its prompt and
--- what the agent changed in it.
function M.rewind_turn_label(turn)
  local files = {}
  for _, file in ipairs(turn.files or {}) do
    files[#files + 1] = file[1] .. " (" .. file[2] .. ")"
  end
  local changed = #files > 0 and table.concat(files, ", ") or "no files"
  local mark = turn.rewound and " [taken back]" or ""
  return string.format("turn %d: %s — %s%s", turn.turn, turn.prompt or "", changed, mark)
end

--- What a rewind's report says, in one message.
function M.describe_rewind(report)
  if type(report) ~= "table" then
    return "rewind: no answer"
  end
  local lines = {}
  local done = report.outcome == "planned" and "would restore" or "restored"
  local head = report.turn == report.last_turn and ("turn " .. report.turn)
    or string.format("turns %d–%d", report.turn, report.last_turn)
  lines[#lines + 1] = string.format("rewind of %s: %s", head, report.outcome)
  for _, entry in ipairs(report.plan or {}) do
    lines[#lines + 1] = string.format("  %s %s (%s)", done, entry[1], entry[2])
  end
  for _, conflict in ipairs(report.conflicts or {}) do
    lines[#lines + 1] = string.format("  kept %s: %s", conflict.path, conflict.why)
  end
  if report.context_edit then
    lines[#lines + 1] = "  conversation taken back"
  end
  return table.concat(lines, "\n")
end

return M
