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
  local lines = M.render(plan)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = "wipe"
  local width = 20
  for _, line in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(line))
  end
  width = math.min(width + 2, math.max(20, vim.o.columns - 4))
  local height = math.min(#lines, math.max(1, vim.o.lines - 6))
  local win = vim.api.nvim_open_win(buf, true, {
    relative = "editor",
    width = width,
    height = height,
    row = math.max(0, math.floor((vim.o.lines - height) / 2) - 1),
    col = math.max(0, math.floor((vim.o.columns - width) / 2)),
    style = "minimal",
    border = "rounded",
    title = " agent plan ",
    title_pos = "center",
  })
  vim.wo[win].wrap = true
  for _, key in ipairs({ "q", "<Esc>" }) do
    vim.keymap.set("n", key, "<cmd>close<cr>", { buffer = buf, nowait = true })
  end
  return buf, win
end

return M
