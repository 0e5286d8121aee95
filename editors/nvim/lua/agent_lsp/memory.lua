-- `:AgentMemory`: the memories new sessions get, from an `agent.memory.list` answer
-- (`{memories = {{id, scope, text, provenance = {session, seq?, time}}, ...}, caps}`), in a
-- float. `render` is pure, so tests/unit.lua checks it on sample data.

local M = {}

--- Where a memory came from, as one line: `session 2026…-ab12 event 17, 2026-12-01T18:06Z`.
local function provenance(memory)
  local from = type(memory.provenance) == "table" and memory.provenance or {}
  local where = type(from.session) == "string" and from.session or "?"
  if type(from.seq) == "number" then
    where = "session " .. where .. " event " .. from.seq
  end
  if type(from.time) == "string" then
    where = where .. ", " .. from.time
  end
  return where
end

--- The float's lines.
function M.render(result)
  local memories = type(result) == "table" and type(result.memories) == "table" and result.memories or {}
  if #memories == 0 then
    return { "No memories: the agent keeps them with its memory tool, or :AgentMemory remember {text}." }
  end
  local lines = {}
  for _, memory in ipairs(memories) do
    local text = vim.split(tostring(memory.text or ""), "\n", { plain = true })
    table.insert(lines, string.format("%s (%s) %s", memory.id or "?", memory.scope or "?", text[1]))
    for i = 2, #text do
      table.insert(lines, "    " .. text[i])
    end
    table.insert(lines, "    from " .. provenance(memory))
  end
  table.insert(lines, "")
  table.insert(lines, ":AgentMemory forget {id} drops one; :AgentMemory edit {id} {text} changes it.")
  return lines
end

function M.show(result)
  return require("agent_lsp.float").open(M.render(result), " agent memories ")
end

return M
