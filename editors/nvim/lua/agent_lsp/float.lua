-- A read-only float near the middle of the editor, for the views that show a server answer
-- (`:AgentPlan`, `:AgentMemory`, `:AgentActivity`); `q` or `<Esc>` closes it.

local M = {}

--- Open `lines` in a float titled `title`. Returns the buffer and the window.
function M.open(lines, title)
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
    title = title,
    title_pos = "center",
  })
  vim.wo[win].wrap = true
  for _, key in ipairs({ "q", "<Esc>" }) do
    vim.keymap.set("n", key, "<cmd>close<cr>", { buffer = buf, nowait = true })
  end
  return buf, win
end

--- Replace the lines of a float `open` made (its height follows, within the editor).
function M.set_lines(buf, win, lines)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  if vim.api.nvim_win_is_valid(win) then
    vim.api.nvim_win_set_height(win, math.min(#lines, math.max(1, vim.o.lines - 6)))
  end
end

return M
