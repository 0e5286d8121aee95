-- `:AgentContext`: the lines of the context view from an `agent.context.show` answer
-- (`{segments = {{id, role, source, tokens, preview, referenced}, ...}, totals}`), grouped by role
-- in the server's order. Pure, so tests/unit.lua checks it on sample data.

local ext = require("agent_lsp.ext")

local M = {}

local function one_line(text, width)
  local line = vim.trim((text or ""):gsub("%s+", " "))
  if vim.fn.strchars(line) > width then
    line = vim.fn.strcharpart(line, 0, width - 1) .. "…"
  end
  return line
end

--- The view's lines; `segments` maps each segment line (1-based) to its segment.
function M.render(view)
  local lines, segments = {}, {}
  if type(view) ~= "table" or type(view.segments) ~= "table" or #view.segments == 0 then
    return { "The context is empty: ask the agent something first." }, segments
  end
  local order, groups = {}, {}
  local total = 0
  for _, segment in ipairs(view.segments) do
    local role = segment.role or "other"
    if not groups[role] then
      groups[role] = {}
      table.insert(order, role)
    end
    table.insert(groups[role], segment)
    total = total + (segment.tokens or 0)
  end
  table.insert(lines, string.format("# Context: %d segments, %s tokens", #view.segments, ext.compact_tokens(total)))
  for _, role in ipairs(order) do
    local sum = 0
    for _, segment in ipairs(groups[role]) do
      sum = sum + (segment.tokens or 0)
    end
    table.insert(lines, "")
    table.insert(lines, string.format("## %s (%d, %s tokens)", role, #groups[role], ext.compact_tokens(sum)))
    for _, segment in ipairs(groups[role]) do
      table.insert(
        lines,
        string.format(
          "%s %6s  %s  %s",
          segment.referenced and "*" or "-",
          ext.compact_tokens(segment.tokens or 0),
          segment.source or tostring(segment.id),
          one_line(segment.preview, 60)
        )
      )
      segments[#lines] = segment
    end
  end
  return lines, segments
end

--- Show the view in a scratch buffer (`q` closes it).
function M.show(view)
  local lines, segments = M.render(view)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].filetype = "markdown"
  vim.cmd("botright split")
  vim.api.nvim_win_set_buf(0, buf)
  vim.keymap.set("n", "q", "<cmd>close<cr>", { buffer = buf, nowait = true })
  return buf
end

return M
