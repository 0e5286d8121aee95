-- agent-lsp for Neovim: starts `agent-lsp serve` with `vim.lsp.start` on the buffers it brokers
-- and on prompt documents (`*.agent.md`), and adds the :Agent* commands. Progress of a turn is
-- LSP progress (`LspProgress`, `vim.lsp.status()`); `@path` completion is LSP completion, so the
-- built-in omnifunc, `vim.lsp.completion`, nvim-cmp and blink.cmp all offer it.

local ext = require("agent_lsp.ext")

local M = {}

---@class agent_lsp.Options
local defaults = {
  --- The server's whole command, as `vim.lsp.config` and nvim-lspconfig take it. (A command
  --- without `serve`, the form of older versions, still works: `serve` is appended, with a note.)
  cmd = { "agent-lsp", "serve" },
  --- Filetypes whose buffers go through agent-lsp (it brokers their language servers);
  --- `nil` means every normal file buffer. Prompt documents (`*.agent.md`) always do.
  filetypes = nil,
  --- Markers of the workspace root (the nearest directory holding one), else the cwd.
  root_markers = { ".git", ".agent-lsp", "pyproject.toml", "package.json", "Cargo.toml", "go.mod" },
  --- Model settings passed as `initializationOptions` (all optional: `~/.config/agent-lsp/config.toml`
  --- and `DEEPSEEK_API_KEY` work too).
  model = nil,
  base_url = nil,
  preset = nil,
  --- The API key, or a function returning it (e.g. reading a password manager). Prefer the
  --- environment variable; never commit it in your config.
  api_key = nil,
  --- Echo the agent's progress in the message area (off if you use fidget.nvim or a statusline).
  progress = true,
  --- In prompt documents, turn on Neovim's own LSP completion (`vim.lsp.completion`, 0.11+):
  --- typing `@` offers paths, and an accepted item is applied as the server's edit, which the
  --- omnifunc cannot do for quoted paths (it cuts an item at its first space). Set to false if
  --- nvim-cmp or blink.cmp completes there.
  prompt_completion = true,
  --- `completeopt` in prompt documents where `prompt_completion` is on (set for the buffer
  --- only): with Neovim's default (`menu,popup`) the first path offered would be inserted
  --- while you type prose after `@`. `false` leaves your own.
  prompt_completeopt = "menu,menuone,noselect,popup",
  --- Ghost text from the server's inline completions (`:help agent_lsp-inline`): `enabled`,
  --- `debounce_ms`, `accept` and `dismiss` keys, `native` (0.12's `vim.lsp.inline_completion`).
  inline_completion = vim.deepcopy(require("agent_lsp.inline").defaults),
  --- Extra fields for `vim.lsp.start` (capabilities from nvim-cmp or blink, handlers, ...).
  lsp = {},
}

M.options = vim.deepcopy(defaults)
M.name = "agent_lsp"
--- The last `agent.status` answer (see `M.statusline()`).
M.status = nil

local function is_prompt_document(buf)
  return vim.api.nvim_buf_get_name(buf):match("%.agent%.md$") ~= nil
end

local function wanted(buf)
  if vim.bo[buf].buftype ~= "" or vim.api.nvim_buf_get_name(buf) == "" then
    return false
  end
  if is_prompt_document(buf) then
    return true
  end
  local filetypes = M.options.filetypes
  if filetypes == nil then
    return vim.bo[buf].filetype ~= ""
  end
  return vim.tbl_contains(filetypes, vim.bo[buf].filetype)
end

function M.root_dir(buf)
  local root = vim.fs.root(buf, M.options.root_markers)
  return root or vim.fn.getcwd()
end

--- The `vim.lsp.start` config of a buffer (also usable with `vim.lsp.config`).
function M.config(buf)
  local opts = M.options
  local api_key = opts.api_key
  if type(api_key) == "function" then
    api_key = api_key()
  end
  local cmd = ext.server_command(opts.cmd, function(message)
    vim.notify_once(message, vim.log.levels.WARN, { title = "agent-lsp" })
  end)
  return vim.tbl_deep_extend("force", {
    name = M.name,
    cmd = cmd,
    root_dir = M.root_dir(buf or 0),
    init_options = ext.init_options(opts, api_key),
    -- Each edit the server makes (a streamed answer's, the agent's) waits for Neovim's
    -- `didChange` of it, since the next one is computed against the text Neovim reports; a
    -- debounce adds its wait to every edit (Neovim's default 150 ms; 50 ms made a chat turn
    -- take 54 ms where it now takes 10). Changes are reported as they happen, as VS Code does.
    flags = { debounce_text_changes = 0 },
  }, opts.lsp or {})
end

--- Attach agent-lsp to `buf` (started once per root, reused after).
function M.attach(buf)
  buf = (buf == nil or buf == 0) and vim.api.nvim_get_current_buf() or buf
  if not wanted(buf) then
    return nil
  end
  -- Completion in prompt documents is turned on at `LspAttach` (see `setup`): only then are the
  -- server's trigger characters known, which `vim.lsp.completion` reads once, when enabled.
  return vim.lsp.start(M.config(buf), { bufnr = buf })
end

--- The text a completion item leaves before the cursor: its edit up to a snippet's `$0`, with
--- the snippet's escapes undone.
local function text_before_cursor(item)
  local text = vim.tbl_get(item, "textEdit", "newText") or item.insertText or item.label or ""
  if item.insertTextFormat == 2 then
    text = text:gsub("%$0.*$", ""):gsub("\\(.)", "%1")
  end
  return text
end

--- `@` completion in prompt document `buf` through Neovim's own LSP completion, its
--- `completeopt`, and, after a folder is chosen, the next completion inside it at once (Neovim
--- asks again only on a trigger character, so typing on inside a folder found nothing).
local function enable_prompt_completion(buf, client)
  vim.lsp.completion.enable(true, client.id, buf, { autotrigger = true })
  if M.options.prompt_completeopt then
    vim.bo[buf].completeopt = M.options.prompt_completeopt
  end
  local pending = nil
  local function continue_inside()
    if not pending or vim.api.nvim_get_current_buf() ~= buf or not vim.fn.mode():find("^i") then
      return
    end
    local col = vim.api.nvim_win_get_cursor(0)[2]
    local before = vim.api.nvim_get_current_line():sub(1, col)
    if before:sub(-#pending) == pending then
      pending = nil
      vim.lsp.completion.get()
    end
  end
  local augroup = vim.api.nvim_create_augroup("agent_lsp_prompt_" .. buf, { clear = true })
  vim.api.nvim_create_autocmd("CompleteDone", {
    group = augroup,
    buffer = buf,
    callback = function()
      pending = nil
      local item = vim.tbl_get(vim.v.completed_item or {}, "user_data", "nvim", "lsp", "completion_item")
      local reason = (vim.v.event or {}).reason
      if item and item.kind == vim.lsp.protocol.CompletionItemKind.Folder
        and vim.tbl_get(item, "data", "agentLsp") ~= nil and (reason == nil or reason == "accept") then
        -- The folder is in the buffer now (a plain item) or once Neovim has expanded its
        -- snippet (after resolving it), which `TextChangedI` then reports.
        pending = text_before_cursor(item)
        vim.schedule(continue_inside)
      end
    end,
  })
  vim.api.nvim_create_autocmd("TextChangedI", { group = augroup, buffer = buf, callback = continue_inside })
  vim.api.nvim_create_autocmd("InsertLeave", {
    group = augroup,
    buffer = buf,
    callback = function()
      pending = nil
    end,
  })
end

--- The agent-lsp client of `buf` (else of any buffer).
function M.client(buf)
  local clients = vim.lsp.get_clients({ name = M.name, bufnr = buf or vim.api.nvim_get_current_buf() })
  if #clients == 0 then
    clients = vim.lsp.get_clients({ name = M.name })
  end
  return clients[1]
end

local function notify(message, level)
  vim.notify(message, level or vim.log.levels.INFO, { title = "agent-lsp" })
end

local function request(client, method, params, handler, buf)
  if vim.fn.has("nvim-0.11") == 1 then
    return client:request(method, params, handler, buf)
  end
  return client.request(method, params, handler, buf)
end

--- Send a server command; `on_done(err, result)` runs when it answers. Fires `User AgentTurnDone`
--- (data: `{command, result, error}`) after turns, and refreshes `M.status`.
function M.execute(command, argument, on_done)
  local client = M.client()
  if not client then
    notify("agent-lsp is not running here (open a file of the workspace, or :checkhealth agent_lsp)", vim.log.levels.ERROR)
    return false
  end
  local params = { command = command, arguments = argument ~= nil and { argument } or {} }
  request(client, "workspace/executeCommand", params, function(err, result)
    if on_done then
      on_done(err, result)
    elseif err and not (ext.is_unknown_command(err) and command == ext.commands.context_show) then
      notify(err.message or vim.inspect(err), vim.log.levels.ERROR)
    end
    if ext.turn_commands[command] then
      if not err and not on_done then
        notify(ext.describe_turn(result))
      end
      vim.api.nvim_exec_autocmds("User", {
        pattern = "AgentTurnDone",
        modeline = false,
        data = { command = command, result = result, error = err },
      })
      M.refresh_status()
    end
  end)
  return true
end

function M.refresh_status()
  local client = M.client()
  if not client then
    return
  end
  request(client, "workspace/executeCommand", { command = ext.commands.status, arguments = {} }, function(err, result)
    if not err then
      M.status = result
      vim.cmd.redrawstatus()
    end
  end)
end

--- For your statusline: session, context tokens and cache share of the last request, and the
--- plan's done items (`plan 2/5`).
function M.statusline()
  if not M.client() then
    return ""
  end
  return ext.format_status(M.status)
end

local function range_argument(buf, line1, line2)
  local last = vim.api.nvim_buf_get_lines(buf, line2 - 1, line2, false)[1] or ""
  return {
    uri = vim.uri_from_bufnr(buf),
    range = { start = { line = line1 - 1, character = 0 }, ["end"] = { line = line2 - 1, character = #last } },
  }
end

--- `:AgentAsk [prompt]`: ask in the chat document; with a range and no prompt, quote the lines
--- into the chat document for you to finish; with neither, prompt for it.
function M.ask(opts)
  opts = opts or {}
  local prompt = opts.args or ""
  if prompt == "" and opts.range and opts.range > 0 then
    return M.execute(ext.commands.ask, range_argument(0, opts.line1, opts.line2), opts.on_done)
  end
  if prompt == "" then
    vim.ui.input({ prompt = "Ask the agent: " }, function(input)
      if input and vim.trim(input) ~= "" then
        M.execute(ext.commands.ask, { prompt = input }, opts.on_done)
      end
    end)
    return true
  end
  return M.execute(ext.commands.ask, { prompt = prompt }, opts.on_done)
end

--- `:[range]AgentExplain`.
function M.explain(opts)
  opts = opts or {}
  local line1, line2 = opts.line1 or vim.fn.line("."), opts.line2 or vim.fn.line(".")
  return M.execute(ext.commands.explain, range_argument(0, line1, line2), opts.on_done)
end

local function cursor_position(buf)
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  local line = vim.api.nvim_buf_get_lines(buf, row - 1, row, false)[1] or ""
  local client = M.client(buf)
  local encoding = client and client.offset_encoding or "utf-16"
  return { line = row - 1, character = vim.str_utfindex(line, encoding, col, false) }
end

--- `:AgentSend`: send the prompt under the cursor of a prompt document.
function M.send(opts)
  opts = opts or {}
  local buf = vim.api.nvim_get_current_buf()
  if not is_prompt_document(buf) then
    notify("AgentSend works in prompt documents (*.agent.md)", vim.log.levels.WARN)
    return false
  end
  return M.execute(ext.commands.send, { uri = vim.uri_from_bufnr(buf), position = cursor_position(buf) }, opts.on_done)
end

--- The LSP form of the buffer's diagnostics (the server's own when it sent them).
local function lsp_diagnostics(buf)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    local original = d.user_data and d.user_data.lsp
    if original and original.range then
      table.insert(out, original)
    else
      table.insert(out, {
        range = {
          start = { line = d.lnum, character = d.col },
          ["end"] = { line = d.end_lnum or d.lnum, character = d.end_col or d.col },
        },
        message = d.message,
        severity = d.severity,
        source = d.source,
        code = d.code,
      })
    end
  end
  return out
end

--- `:AgentFix`: "Fix with agent" on the diagnostic under the cursor.
function M.fix(opts)
  opts = opts or {}
  local buf = vim.api.nvim_get_current_buf()
  local diagnostic = ext.diagnostic_at(lsp_diagnostics(buf), cursor_position(buf))
  if not diagnostic then
    notify("no diagnostic under the cursor", vim.log.levels.WARN)
    return false
  end
  return M.execute(ext.commands.fix, { uri = vim.uri_from_bufnr(buf), diagnostic = diagnostic }, opts.on_done)
end

function M.cancel(opts)
  return M.execute(ext.commands.cancel, nil, (opts or {}).on_done or function(err, result)
    if err then
      notify(err.message, vim.log.levels.ERROR)
    elseif result and not result.cancelled then
      notify("no turn is running")
    end
  end)
end

function M.compact(opts)
  return M.execute(ext.commands.compact, nil, (opts or {}).on_done)
end

function M.new_session(opts)
  return M.execute(ext.commands.session_new, nil, (opts or {}).on_done or function(err, result)
    if err then
      notify(err.message, vim.log.levels.ERROR)
    else
      notify("new session " .. result.session)
      M.refresh_status()
    end
  end)
end

--- `:AgentMcpApprove`: the server asks (with `vim.ui.select`) whether the workspace's `.mcp.json`
--- servers, as the file is now, may run; they join the next session.
function M.mcp_approve(opts)
  return M.execute(ext.commands.mcp_approve, nil, (opts or {}).on_done or function(err, result)
    if err then
      notify(err.message, vim.log.levels.ERROR)
    elseif result.already then
      notify(result.file .. " is already approved")
    elseif result.approved then
      notify("approved " .. result.file .. "; its servers join the next session (:AgentNewSession)")
    else
      notify("not approved")
    end
  end)
end

--- `:AgentHooksApprove`: the server asks (with `vim.ui.select`) whether the workspace's hooks
--- files (`.agent-lsp/hooks.toml`, a Claude Code settings file inside it), as they are now, may
--- run; they run from the next session on.
function M.hooks_approve(opts)
  return M.execute(ext.commands.hooks_approve, nil, (opts or {}).on_done or function(err, result)
    if err then
      notify(err.message, vim.log.levels.ERROR)
    elseif result.approved then
      local files = {}
      for _, file in ipairs(result.files) do
        table.insert(files, file.file)
      end
      notify("approved " .. table.concat(files, ", ") .. "; its hooks run from the next session on (:AgentNewSession)")
    else
      notify("not approved")
    end
  end)
end

function M.sessions(opts)
  return M.execute(ext.commands.session_list, nil, (opts or {}).on_done or function(err, result)
    if err then
      notify(err.message, vim.log.levels.ERROR)
    else
      notify("sessions (oldest first):\n" .. table.concat(result or {}, "\n"))
    end
  end)
end

--- `:AgentTool NAME [JSON]`: one tool without a model; the result opens in a scratch buffer.
function M.tool(opts)
  opts = opts or {}
  local name, json = (opts.args or ""):match("^%s*(%S+)%s*(.*)$")
  if not name then
    notify("usage: :AgentTool NAME {json arguments}", vim.log.levels.WARN)
    return false
  end
  local ok, arguments = pcall(vim.json.decode, json ~= "" and json or "{}")
  if not ok or type(arguments) ~= "table" then
    notify("the tool's arguments must be a JSON object", vim.log.levels.ERROR)
    return false
  end
  return M.execute(ext.commands.tool, { name = name, arguments = arguments }, opts.on_done or function(err, result)
    if err then
      notify(err.message, vim.log.levels.ERROR)
      return
    end
    local buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(result.text or "", "\n"))
    vim.bo[buf].filetype = "markdown"
    vim.cmd("botright split")
    vim.api.nvim_win_set_buf(0, buf)
  end)
end

--- `:AgentContext [query]`: the session's context window by segment.
function M.context(opts)
  opts = opts or {}
  -- An empty Lua table would be sent as a JSON array; the server takes an object.
  local argument = vim.empty_dict()
  if opts.args and opts.args ~= "" then
    argument = { query = opts.args }
  end
  return M.execute(ext.commands.context_show, argument, opts.on_done or function(err, result)
    if err and ext.is_unknown_command(err) then
      notify("this agent-lsp has no context view yet (agent.context.show is unknown): update agent-lsp", vim.log.levels.WARN)
    elseif err then
      notify(err.message, vim.log.levels.ERROR)
    else
      require("agent_lsp.context").show(result)
    end
  end)
end

--- `:AgentPlan`: the session's goal and the agent's plan in a float (after the running turn,
--- if one runs: the server answers the status without the plan then).
function M.plan(opts)
  opts = opts or {}
  return M.execute(ext.commands.status, nil, opts.on_done or function(err, result)
    if err then
      notify(err.message, vim.log.levels.ERROR)
    elseif type(result) == "table" and result.running then
      notify("a turn is running; :AgentPlan shows the plan once it ends (its progress says when the plan changes)")
    else
      M.status = result
      require("agent_lsp.plan").show(ext.plan_of(result))
    end
  end)
end

--- `:AgentActivity`: the agent's background jobs and sub-agents, running and recently ended, in
--- a float; `x` stops the one under the cursor (see `agent_lsp.activity`).
--- `:AgentRewind [N|last] [files|context|both] [force]`, `:AgentRewind undo`: see rewind.lua.
function M.rewind(opts)
  return require("agent_lsp.rewind").open(M, opts or {})
end

function M.activity(opts)
  return require("agent_lsp.activity").open(M, opts or {})
end

--- `:AgentMemory`: the memories new sessions get, in a float; `:AgentMemory remember {text}`,
--- `:AgentMemory forget {id}` and `:AgentMemory edit {id} {text}` change them (as the agent's
--- `memory` tool and `agent-lsp memory` do; new sessions see the change, the running one keeps
--- the memories it started with).
function M.memory(opts)
  opts = opts or {}
  local words = vim.split(vim.trim(opts.args or ""), "%s+", { trimempty = true })
  local action = words[1]
  local function done(message)
    return opts.on_done or function(err)
      if err then
        notify(err.message, vim.log.levels.ERROR)
      else
        notify(message)
      end
    end
  end
  if not action or action == "list" then
    return M.execute(ext.commands.memory_list, nil, opts.on_done or function(err, result)
      if err then
        notify(err.message, vim.log.levels.ERROR)
      else
        require("agent_lsp.memory").show(result)
      end
    end)
  elseif action == "remember" and #words > 1 then
    local text = table.concat(words, " ", 2)
    return M.execute(ext.commands.memory_remember, { text = text }, done("remembered"))
  elseif action == "forget" and #words == 2 then
    return M.execute(ext.commands.memory_forget, { id = words[2] }, done("forgotten: " .. words[2]))
  elseif action == "edit" and #words > 2 then
    local text = table.concat(words, " ", 3)
    return M.execute(ext.commands.memory_edit, { id = words[2], text = text }, done("changed: " .. words[2]))
  end
  notify("usage: :AgentMemory [list | remember {text} | forget {id} | edit {id} {text}]", vim.log.levels.WARN)
  return false
end

--- `:AgentGoal {text}`: the session's goal from now on (kept verbatim through compactions);
--- without text, prompt for it.
function M.goal(opts)
  opts = opts or {}
  local function set(text)
    text = vim.trim(text or "")
    if text == "" then
      notify("the goal is empty; say what the session is for", vim.log.levels.WARN)
      return false
    end
    return M.execute(ext.commands.goal_set, { goal = text }, opts.on_done or function(err)
      if err then
        notify(err.message, vim.log.levels.ERROR)
      else
        notify("goal set")
        M.refresh_status()
      end
    end)
  end
  if (opts.args or "") == "" then
    vim.ui.input({ prompt = "The session's goal: " }, function(input)
      if input then
        set(input)
      end
    end)
    return true
  end
  return set(opts.args)
end

function M.show_status()
  return M.execute(ext.commands.status, nil, function(err, result)
    if err then
      notify(err.message, vim.log.levels.ERROR)
    else
      M.status = result
      notify(ext.format_status(result))
    end
  end)
end

local function on_progress(args)
  local data = args.data or {}
  local client = vim.lsp.get_client_by_id(data.client_id)
  if not client or client.name ~= M.name then
    return
  end
  local value = data.params and data.params.value or {}
  local text = value.title or ""
  if value.message then
    text = text .. ": " .. value.message
  end
  if value.kind == "end" then
    text = (value.title or "agent") .. (value.message and (": " .. value.message) or ": done")
  end
  vim.api.nvim_echo({ { "agent-lsp " .. text, value.kind == "end" and "MoreMsg" or "Comment" } }, false, {})
end

local group = vim.api.nvim_create_augroup("agent_lsp", { clear = true })

--- `require("agent_lsp").setup({...})`: options (see `:help agent_lsp-options`), then attach to
--- the current and every later buffer it brokers.
function M.setup(opts)
  opts = opts or {}
  M.options = vim.tbl_deep_extend("force", vim.deepcopy(defaults), opts)
  -- Lists replace the defaults instead of merging into them index by index.
  for _, key in ipairs({ "cmd", "filetypes", "root_markers" }) do
    if opts[key] ~= nil then
      M.options[key] = opts[key]
    end
  end
  vim.api.nvim_clear_autocmds({ group = group })
  -- Ghost text where the server offers inline completion (its capability is known once the
  -- client is attached), never in prompt documents.
  vim.api.nvim_create_autocmd("LspAttach", {
    group = group,
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data.client_id)
      if not client or client.name ~= M.name then
        return
      end
      if is_prompt_document(args.buf) then
        if M.options.prompt_completion and vim.lsp.completion then
          enable_prompt_completion(args.buf, client)
        end
      elseif (client.server_capabilities or {}).inlineCompletionProvider then
        require("agent_lsp.inline").attach(args.buf, client, M.options.inline_completion)
      end
    end,
  })
  vim.api.nvim_create_autocmd("FileType", {
    group = group,
    callback = function(args)
      M.attach(args.buf)
    end,
  })
  if M.options.progress then
    vim.api.nvim_create_autocmd("LspProgress", { group = group, callback = on_progress })
  end
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) then
      M.attach(buf)
    end
  end
  M.configured = true
end

return M
