-- agent-lsp's user commands. They exist as soon as the plugin is on 'runtimepath'; the server
-- starts once `require("agent_lsp").setup({...})` has run.
if vim.g.loaded_agent_lsp or vim.fn.has("nvim-0.10") == 0 then
  return
end
vim.g.loaded_agent_lsp = true

local function command(name, fn, opts)
  vim.api.nvim_create_user_command(name, function(args)
    require("agent_lsp")[fn](args)
  end, opts)
end

command("AgentAsk", "ask", { nargs = "*", range = true, desc = "Ask the agent (with a range: quote the lines)" })
command("AgentExplain", "explain", { range = true, desc = "Explain the lines with the agent" })
command("AgentSend", "send", { desc = "Send the prompt under the cursor (*.agent.md)" })
command("AgentFix", "fix", { desc = "Fix the diagnostic under the cursor with the agent" })
command("AgentCancel", "cancel", { desc = "Stop the running agent turn" })
command("AgentCompact", "compact", { desc = "Compact the agent's session now" })
command("AgentContext", "context", { nargs = "?", desc = "Show the agent's context window" })
command("AgentNewSession", "new_session", { desc = "Start a new agent session" })
command("AgentSessions", "sessions", { desc = "List the workspace's agent sessions" })
command("AgentMcpApprove", "mcp_approve", { desc = "Approve the workspace's .mcp.json servers" })
command("AgentHooksApprove", "hooks_approve", { desc = "Approve the workspace's hooks files" })
command("AgentTool", "tool", { nargs = "+", desc = "Run one agent tool: NAME {json}" })
command("AgentStatus", "show_status", { desc = "Session, context tokens and cache share" })
command("AgentPlan", "plan", { desc = "Show the session's goal and the agent's plan" })
command("AgentActivity", "activity", { desc = "Show the agent's background jobs and sub-agents" })
command("AgentGoal", "goal", { nargs = "*", desc = "Set the session's goal" })
command("AgentMemory", "memory", { nargs = "*", desc = "List, remember, forget or edit the agent's memories" })
command("AgentRewind", "rewind", { nargs = "*", desc = "Take back turns: [N|last] [files|context|both] [force], or undo" })
