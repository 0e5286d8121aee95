-- Inline completion (ghost text) from agent-lsp's `textDocument/inlineCompletion` (LSP 3.18).
--
-- On Neovim 0.12+ this is `vim.lsp.inline_completion` (unless `native = false`); on 0.11 it is
-- done here (0.10 gets none): while in Insert mode, a request goes out `debounce_ms` after the last change
-- (InsertEnter, TextChangedI), the previous one is cancelled (`$/cancelRequest`, which the
-- server turns into cancelling its HTTP request), an answer that arrives after the text or the
-- cursor moved on is dropped, and the first item is drawn as virtual text at the cursor (the
-- rest of its first line inline, further lines below). The accept key replaces the item's
-- range with its text; the dismiss key, leaving Insert mode or moving the cursor elsewhere
-- removes it. Prompt documents get none (the server suggests nothing there either).

local M = {}

M.namespace = vim.api.nvim_create_namespace("agent_lsp.inline")

---@class agent_lsp.InlineOptions
M.defaults = {
  --- Ghost text from the server's inline completions (the server offers them when
  --- `[completion]` in its config file names a model).
  enabled = true,
  --- Milliseconds without typing before a request goes out (0.11 implementation).
  debounce_ms = 75,
  --- Insert-mode key that accepts the suggestion; without one it is typed as usual.
  accept = "<Tab>",
  --- Insert-mode key that dismisses the suggestion; without one it is typed as usual.
  dismiss = "<C-]>",
  --- On Neovim 0.12+, use `vim.lsp.inline_completion` (its own rendering and dismissal).
  native = true,
  --- Highlight group of the ghost text.
  hl_group = "AgentLspGhostText",
}

vim.api.nvim_set_hl(0, "AgentLspGhostText", { default = true, link = "Comment" })

--- Per buffer: `{client_id, timer, request_id, item, extmark}`.
local states = {}

local function native_available(options)
  return options.native and vim.lsp.inline_completion ~= nil and vim.lsp.inline_completion.enable ~= nil
end

--- The text an item inserts (a snippet's placeholders are kept as written).
local function insert_text(raw)
  if type(raw.insertText) == "table" then
    return raw.insertText.value or ""
  end
  return raw.insertText or ""
end

--- What to draw for `item` at the cursor, given the line's text: the part of the suggestion's
--- first line not yet typed (before the cursor) nor already there (after the cursor, which the
--- item's range replaces), and the further lines.
function M.ghost(line, item, cursor_col)
  local lines = vim.split(item.text, "\n", { plain = true })
  local first = lines[1]
  local typed = line:sub(item.start_col + 1, cursor_col)
  if first:sub(1, #typed) ~= typed then
    return nil
  end
  first = first:sub(#typed + 1)
  if item.end_row == item.start_row and item.end_col > cursor_col then
    local kept = line:sub(cursor_col + 1, item.end_col)
    if #lines == 1 and first:sub(-#kept) == kept then
      first = first:sub(1, #first - #kept)
    end
  end
  return { first = first, more = { unpack(lines, 2) } }
end

local function clear(buf)
  local state = states[buf]
  if not state then
    return
  end
  if state.extmark and vim.api.nvim_buf_is_valid(buf) then
    pcall(vim.api.nvim_buf_del_extmark, buf, M.namespace, state.extmark)
  end
  state.extmark = nil
  state.item = nil
end

local function cancel(buf)
  local state = states[buf]
  if not state then
    return
  end
  if state.timer then
    state.timer:stop()
  end
  if state.request_id then
    local client = vim.lsp.get_client_by_id(state.client_id)
    if client then
      client:cancel_request(state.request_id)
    end
    state.request_id = nil
  end
end

--- The suggestion shown in `buf`, if any: `{text, start_row, start_col, end_row, end_col}`
--- (0-based rows, byte columns).
function M.current(buf)
  local state = states[buf ~= 0 and buf or vim.api.nvim_get_current_buf()]
  return state and state.item
end

local function show(buf, item, options)
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  row = row - 1
  if row ~= item.start_row then
    return
  end
  local line = vim.api.nvim_buf_get_lines(buf, row, row + 1, false)[1] or ""
  local ghost = M.ghost(line, item, col)
  if not ghost or (ghost.first == "" and #ghost.more == 0) then
    return
  end
  local virt_lines = vim.tbl_map(function(text)
    return { { text, options.hl_group } }
  end, ghost.more)
  local state = states[buf]
  state.item = item
  state.shown_at = { row, col }
  state.extmark = vim.api.nvim_buf_set_extmark(buf, M.namespace, row, col, {
    virt_text = { { ghost.first, options.hl_group } },
    virt_text_pos = "inline",
    virt_lines = #virt_lines > 0 and virt_lines or nil,
    hl_mode = "combine",
  })
end

local function request(buf, options)
  local state = states[buf]
  local client = state and vim.lsp.get_client_by_id(state.client_id)
  if not client or vim.api.nvim_get_current_buf() ~= buf or not vim.fn.mode():match("^i") then
    return
  end
  cancel(buf)
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.context = { triggerKind = 2 }
  local tick = vim.api.nvim_buf_get_changedtick(buf)
  local cursor = vim.api.nvim_win_get_cursor(0)
  local ok, id
  ok, id = client:request("textDocument/inlineCompletion", params, function(err, result)
    if state.request_id == id then
      state.request_id = nil
    end
    -- A stale answer (the text or the cursor moved on) is dropped; the next request is coming.
    if err or not result or vim.api.nvim_get_current_buf() ~= buf
      or vim.api.nvim_buf_get_changedtick(buf) ~= tick
      or not vim.deep_equal(vim.api.nvim_win_get_cursor(0), cursor)
      or not vim.fn.mode():match("^i") then
      return
    end
    local raw = (result.items or result)[1]
    if not raw then
      return
    end
    local row = cursor[1] - 1
    local item = { text = insert_text(raw), start_row = row, start_col = cursor[2], end_row = row, end_col = cursor[2] }
    if raw.range then
      item.start_row = raw.range.start.line
      item.end_row = raw.range["end"].line
      item.start_col = vim.lsp.util._get_line_byte_from_position(buf, raw.range.start, client.offset_encoding)
      item.end_col = vim.lsp.util._get_line_byte_from_position(buf, raw.range["end"], client.offset_encoding)
    end
    clear(buf)
    show(buf, item, options)
  end, buf)
  if ok then
    state.request_id = id
  end
end

--- Accept the suggestion shown in `buf`: its range is replaced by its text and the cursor goes
--- to the end of it. Returns whether there was one.
function M.accept(buf)
  buf = (buf == nil or buf == 0) and vim.api.nvim_get_current_buf() or buf
  local state = states[buf]
  local item = state and state.item
  if not item then
    return false
  end
  clear(buf)
  cancel(buf)
  local lines = vim.split(item.text, "\n", { plain = true })
  vim.api.nvim_buf_set_text(buf, item.start_row, item.start_col, item.end_row, item.end_col, lines)
  local last_row = item.start_row + #lines - 1
  local last_col = (#lines == 1 and item.start_col or 0) + #lines[#lines]
  vim.api.nvim_win_set_cursor(0, { last_row + 1, last_col })
  return true
end

--- Dismiss the suggestion shown in `buf`. Returns whether there was one.
function M.dismiss(buf)
  buf = (buf == nil or buf == 0) and vim.api.nvim_get_current_buf() or buf
  local shown = M.current(buf) ~= nil
  clear(buf)
  cancel(buf)
  return shown
end

--- A key that does `action` when a suggestion is shown, and is typed as usual otherwise.
local function map(buf, key, action)
  if not key or key == "" then
    return
  end
  vim.keymap.set("i", key, function()
    if not action(buf) then
      vim.api.nvim_feedkeys(vim.keycode(key), "n", false)
    end
  end, { buffer = buf, desc = "agent-lsp inline completion" })
end

--- Turn ghost text on for `buf`, served by `client`.
function M.attach(buf, client, options)
  options = vim.tbl_deep_extend("force", M.defaults, options or {})
  if not options.enabled or states[buf] then
    return
  end
  if native_available(options) then
    states[buf] = { client_id = client.id, native = true }
    vim.lsp.inline_completion.enable(true, { bufnr = buf })
    if options.accept and options.accept ~= "" then
      -- As `:help vim.lsp.inline_completion.get()` shows: it answers false when nothing was
      -- accepted, and the key is typed then.
      vim.keymap.set("i", options.accept, function()
        if not vim.lsp.inline_completion.get({ bufnr = buf }) then
          return options.accept
        end
      end, { buffer = buf, expr = true, replace_keycodes = true, desc = "agent-lsp inline completion" })
    end
    return
  end
  if vim.fn.has("nvim-0.11") == 0 then
    return
  end
  local state = { client_id = client.id, timer = vim.uv.new_timer() }
  states[buf] = state
  local group = vim.api.nvim_create_augroup("agent_lsp.inline." .. buf, { clear = true })
  local function schedule()
    clear(buf)
    cancel(buf)
    state.timer:start(options.debounce_ms, 0, vim.schedule_wrap(function()
      request(buf, options)
    end))
  end
  vim.api.nvim_create_autocmd({ "InsertEnter", "TextChangedI" }, { group = group, buffer = buf, callback = schedule })
  vim.api.nvim_create_autocmd("CursorMovedI", {
    group = group,
    buffer = buf,
    callback = function()
      local cursor = vim.api.nvim_win_get_cursor(0)
      if state.shown_at and (cursor[1] - 1 ~= state.shown_at[1] or cursor[2] ~= state.shown_at[2]) then
        clear(buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd({ "InsertLeave", "BufLeave" }, {
    group = group,
    buffer = buf,
    callback = function()
      M.dismiss(buf)
    end,
  })
  vim.api.nvim_create_autocmd({ "LspDetach", "BufWipeout" }, {
    group = group,
    buffer = buf,
    callback = function(args)
      if args.event == "LspDetach" and args.data and args.data.client_id ~= client.id then
        return
      end
      M.detach(buf)
    end,
  })
  map(buf, options.accept, M.accept)
  map(buf, options.dismiss, M.dismiss)
end

--- Turn ghost text off for `buf`.
function M.detach(buf)
  local state = states[buf]
  if not state then
    return
  end
  if state.native then
    vim.lsp.inline_completion.enable(false, { bufnr = buf })
  else
    M.dismiss(buf)
    state.timer:close()
    pcall(vim.api.nvim_del_augroup_by_name, "agent_lsp.inline." .. buf)
  end
  states[buf] = nil
end

return M
