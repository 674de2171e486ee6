-- Argo CD health of nvidia.com/DynamoGraphDeployment (dyn-gitops; docs/argocd.md).
-- Status written by the companion controller: state (initializing|pending|successful|failed),
-- conditions[type=Ready], observedGeneration, rollingUpdate.phase.
-- failed -> Degraded (even when stale: a failed reconcile leaves observedGeneration behind);
-- successful and observedGeneration == generation -> Healthy; anything else -> Progressing.
-- Plain Lua 5.1 without the string library (Argo CD's default sandbox).
local hs = {}
local status = obj.status
if status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to report status"
  return hs
end

local ready = nil
if status.conditions ~= nil then
  for _, c in ipairs(status.conditions) do
    if c.type == "Ready" then
      ready = c
    end
  end
end
local detail = ""
if ready ~= nil and ready.message ~= nil and ready.message ~= "" then
  detail = ": " .. ready.message
end

if status.state == "failed" then
  hs.status = "Degraded"
  hs.message = "Failed" .. detail
  return hs
end

local generation = obj.metadata.generation
local observed = status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  hs.status = "Progressing"
  if observed == nil then
    hs.message = "Waiting for the controller to observe generation " .. tostring(generation)
  else
    hs.message = "Waiting for the controller to observe generation " .. tostring(generation)
      .. " (observed " .. tostring(observed) .. ")"
  end
  return hs
end

local rolling = status.rollingUpdate
if rolling ~= nil and (rolling.phase == "Pending" or rolling.phase == "InProgress") then
  hs.status = "Progressing"
  hs.message = "Rolling update " .. rolling.phase
  return hs
end

if status.state == "successful" and (ready == nil or ready.status ~= "False") then
  hs.status = "Healthy"
  if detail ~= "" then
    hs.message = ready.message
  else
    hs.message = "All resources are ready"
  end
  return hs
end

hs.status = "Progressing"
hs.message = tostring(status.state or "initializing") .. detail
return hs
