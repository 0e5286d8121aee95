-- `:AgentPlan`: the session's goal and the agent's `todo` plan, from the `plan` of an
-- `agent.status` answer (`{goal, goal_source, items = {{text, status}, ...}, open}`), in a
-- floating window. `render` is pure, so tests/unit.lua checks it on sample data.

local ext = require("agent_lsp.ext")

local M = {}

--- The float's lines.
function M.render(plan)
  local goal = type(plan) == "table" and type(plan.goal) == "string" and plan.goal or nil
  local items = type(plan) == "table" and type(plan.items) == "table" and plan.items or {}
  if not goal and #items == 0 then
    return { "No plan yet: the agent writes one with its todo tool." }
  end
  local lines = {}
  if goal then
    local source = plan.goal_source == "set" and "set" or "first prompt"
    table.insert(lines, "Goal (" .. source .. "):")
    for _, line in ipairs(vim.split(goal, "\n", { plain = true })) do
      table.insert(lines, "  " .. line)
    end
  end
  if #items > 0 then
    if #lines > 0 then
      table.insert(lines, "")
    end
    table.insert(lines, "Plan: " .. ext.plan_summary(plan))
    for _, item in ipairs(items) do
      table.insert(lines, "  " .. ext.plan_mark(item.status) .. " " .. item.text)
    end
  end
  return lines
end

--- Show the plan in a float near the middle of the editor (`q` or `<Esc>` closes it).
--- Returns the buffer and the window.
function M.show(plan)
  return require("agent_lsp.float").open(M.render(plan), " agent plan ")
end

return M
