-- `:checkhealth agent_lsp`: Neovim's version, the server binary, the model configuration and
-- the running client.

local M = {}

function M.check()
  local health = vim.health
  health.start("agent-lsp")

  if vim.fn.has("nvim-0.10") == 1 then
    health.ok("Neovim " .. tostring(vim.version()))
  else
    health.error("Neovim 0.10 or newer is needed (vim.lsp.start, vim.fs.root, LspProgress)")
  end

  local plugin = require("agent_lsp")
  if plugin.configured then
    health.ok('require("agent_lsp").setup() has run')
  else
    health.warn('require("agent_lsp").setup() has not run: the server does not start', {
      'Add require("agent_lsp").setup({}) to your init.lua',
    })
  end

  local binary = plugin.options.cmd[1]
  if vim.fn.executable(binary) == 1 then
    local out = vim.fn.system({ binary, "--version" })
    health.ok(string.format("`%s` found: %s (%s)", binary, vim.fn.exepath(binary), vim.trim(out)))
  else
    health.error(string.format("`%s` is not executable", binary), {
      "Install agent-lsp (cargo install --path agent-lsp) or set cmd = { '/path/to/agent-lsp', 'serve' } in setup()",
    })
  end

  local options = plugin.options
  if options.api_key or vim.env.DEEPSEEK_API_KEY or options.base_url then
    health.ok("a model is configured in setup() or DEEPSEEK_API_KEY")
  else
    -- The file agent-lsp reads: the server inherits Neovim's environment.
    local config = vim.env.AGENT_LSP_CONFIG
    local named = config and (config .. " ($AGENT_LSP_CONFIG)")
    if not config or config == "" then
      config = vim.fs.joinpath(vim.env.XDG_CONFIG_HOME or (vim.env.HOME .. "/.config"), "agent-lsp/config.toml")
      named = config
    end
    local has_provider = false
    if vim.fn.filereadable(config) == 1 then
      for _, line in ipairs(vim.fn.readfile(config)) do
        if line:match("^%s*%[provider%]") then
          has_provider = true
          break
        end
      end
    end
    if has_provider then
      health.info("the model comes from the [provider] table of " .. named)
    else
      health.warn("no model configured", {
        "export DEEPSEEK_API_KEY=... before starting Neovim",
        "or setup({ base_url = 'http://127.0.0.1:8080/v1', model = '...' })",
        "or a [provider] table in " .. named,
      })
    end
  end

  local clients = vim.lsp.get_clients({ name = plugin.name })
  if #clients == 0 then
    health.info("no agent-lsp client is running (open a file of the workspace)")
  end
  for _, client in ipairs(clients) do
    local commands = vim.tbl_get(client.server_capabilities or {}, "executeCommandProvider", "commands") or {}
    health.ok(string.format(
      "client %d running for %s (%d commands, %d buffers)",
      client.id,
      client.root_dir or client.config.root_dir or "?",
      #commands,
      vim.tbl_count(client.attached_buffers or {})
    ))
  end
end

return M
