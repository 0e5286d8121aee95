-- `:AgentRewind`: take back what the agent's turns did (the files they changed, through the
-- editor for open buffers, so `u` works; and the conversation), or give the last rewind back.
local ext = require("agent_lsp.ext")

local M = {}

local function notify(message, level)
  vim.notify(message, level or vim.log.levels.INFO, { title = "agent-lsp" })
end

local SCOPES = { files = true, context = true, both = true }

--- Parse `:AgentRewind [N|last] [files|context|both] [force]` or `:AgentRewind undo`.
function M.parse(args)
  local parsed = { scope = nil, turn = nil, force = false, undo = false }
  for _, word in ipairs(vim.split(vim.trim(args or ""), "%s+", { trimempty = true })) do
    if word == "undo" then
      parsed.undo = true
    elseif word == "force" or word == "!" then
      parsed.force = true
    elseif SCOPES[word] then
      parsed.scope = word
    elseif word == "last" then
      parsed.turn = nil
      parsed.last = true
    elseif tonumber(word) then
      parsed.turn = tonumber(word)
    else
      return nil, "usage: :AgentRewind [N|last] [files|context|both] [force] | :AgentRewind undo"
    end
  end
  return parsed
end

--- Run the rewind for `agent` (`require("agent_lsp")`): pick the turn and what to take back
--- with `vim.ui.select` unless the arguments say, show the conflicts and ask whether to
--- overwrite them; `opts.on_done(report)` runs at the end.
function M.open(agent, opts)
  opts = opts or {}
  local parsed, usage = M.parse(opts.args)
  if not parsed then
    notify(usage, vim.log.levels.WARN)
    return false
  end
  local function finish(err, report)
    if err then
      notify(err.message, vim.log.levels.ERROR)
    else
      notify(ext.describe_rewind(report))
    end
    if opts.on_done then
      opts.on_done(err, report)
    end
  end
  if parsed.undo then
    return agent.execute(ext.commands.rewind_undo, nil, finish)
  end
  local function run(turn, scope)
    local argument = { turn = turn, scope = scope, dryRun = true }
    agent.execute(ext.commands.rewind, argument, function(err, plan)
      if err then
        return finish(err)
      end
      argument.dryRun = nil
      if parsed.force or #(plan.conflicts or {}) == 0 then
        argument.force = parsed.force or nil
        return agent.execute(ext.commands.rewind, argument, finish)
      end
      local names = {}
      for _, conflict in ipairs(plan.conflicts) do
        names[#names + 1] = conflict.path .. " (" .. conflict.why .. ")"
      end
      vim.ui.select({ "Keep my changes", "Overwrite them" }, {
        prompt = "You changed " .. table.concat(names, ", ") .. " after the turn:",
      }, function(choice)
        if not choice then
          return finish(nil, plan)
        end
        argument.force = choice == "Overwrite them" or nil
        agent.execute(ext.commands.rewind, argument, finish)
      end)
    end)
  end
  local function with_scope(turn)
    if parsed.scope then
      return run(turn, parsed.scope)
    end
    vim.ui.select({ "both", "files", "context" }, {
      prompt = "Take back the files, the conversation, or both?",
      format_item = function(item)
        return ({ both = "Files and conversation", files = "Files only", context = "Conversation only" })[item]
      end,
    }, function(scope)
      if scope then
        run(turn, scope)
      end
    end)
  end
  if parsed.turn or parsed.last then
    with_scope(parsed.turn)
    return true
  end
  return agent.execute(ext.commands.rewind_turns, nil, function(err, result)
    if err then
      return finish(err)
    end
    local turns = {}
    for _, turn in ipairs(result.turns or {}) do
      if turn.rewindable and not turn.rewound then
        table.insert(turns, 1, turn)
      end
    end
    if #turns == 0 then
      return notify("no turn of this session can be taken back", vim.log.levels.WARN)
    end
    vim.ui.select(turns, {
      prompt = "Rewind to before which turn? (it and every later turn are taken back)",
      format_item = ext.rewind_turn_label,
    }, function(turn)
      if turn then
        with_scope(turn.turn)
      end
    end)
  end)
end

return M
