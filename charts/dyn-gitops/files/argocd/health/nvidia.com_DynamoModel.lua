-- Argo CD health of nvidia.com/DynamoModel (dyn-gitops; docs/argocd.md).
-- The companion controller (or the Dynamo operator) loads a LoRA adapter into every worker
-- of the base model and reports it in status: endpoints, readyEndpoints, totalEndpoints and
-- the conditions EndpointsReady (the operator's) and Ready (the companion controller's).
-- No status, or conditions of an older generation -> Progressing; Ready False with reason
-- LoadFailed (a worker refused or did not answer the load; retried) -> Degraded; Ready (or,
-- without it, EndpointsReady) True -> Healthy; otherwise (no workers yet, workers not
-- ready) -> Progressing. Plain Lua 5.1 without the string library (Argo CD's sandbox).
local hs = {}
local status = obj.status
if status == nil or status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to report status"
  return hs
end

local ready = nil
local endpoints = nil
for _, c in ipairs(status.conditions) do
  if c.type == "Ready" then
    ready = c
  elseif c.type == "EndpointsReady" then
    endpoints = c
  end
end
local verdict = ready or endpoints
if verdict == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to report status"
  return hs
end

local generation = obj.metadata.generation
local observed = verdict.observedGeneration
if generation ~= nil and observed ~= nil and observed < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to observe generation " .. tostring(generation)
    .. " (observed " .. tostring(observed) .. ")"
  return hs
end

local message = tostring(verdict.message or verdict.reason or "")
if verdict.status == "True" then
  hs.status = "Healthy"
elseif verdict.type == "Ready" and verdict.reason == "LoadFailed" then
  hs.status = "Degraded"
else
  hs.status = "Progressing"
end
hs.message = message
return hs
