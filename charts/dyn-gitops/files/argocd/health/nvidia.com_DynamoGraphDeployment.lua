-- Argo CD health of nvidia.com/DynamoGraphDeployment (dyn-gitops; docs/argocd.md).
-- The v1beta1 status the companion controller writes as the Dynamo 1.5 operator does
-- (api/v1beta1/dynamographdeployment_types.go @ 2a6da14c8): state
-- (initializing|pending|successful|failed), conditions[type=Ready] with its reason and
-- observedGeneration, observedGeneration, rollingUpdate.phase, restart.phase.
-- failed (or a failed rolling update / restart) -> Degraded, even when stale: a failed
-- reconcile leaves observedGeneration behind. Healthy only when the status and the Ready
-- condition are of the current generation, Ready is True and nothing is rolling or
-- restarting. Anything else -> Progressing, with the Ready reason of 1.4+ in words.
-- Plain Lua 5.1 without the string library (Argo CD's default sandbox).
local hs = {}
local status = obj.status
if status == nil or status.state == nil then
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
local message = ""
if ready ~= nil and ready.message ~= nil then
  message = ready.message
end
local detail = ""
if message ~= "" then
  detail = ": " .. message
end

if status.state == "failed" then
  hs.status = "Degraded"
  hs.message = "Failed" .. detail
  return hs
end
local rolling = status.rollingUpdate
if rolling ~= nil and rolling.phase == "Failed" then
  hs.status = "Degraded"
  hs.message = "Rolling update failed" .. detail
  return hs
end
local restart = status.restart
if restart ~= nil and restart.phase == "Failed" then
  hs.status = "Degraded"
  hs.message = "Restart " .. tostring(restart.observedID) .. " failed" .. detail
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
if generation ~= nil and ready ~= nil and ready.observedGeneration ~= nil
    and ready.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Ready is of generation " .. tostring(ready.observedGeneration)
    .. ", not yet of " .. tostring(generation)
  return hs
end

if rolling ~= nil and (rolling.phase == "Pending" or rolling.phase == "InProgress") then
  hs.status = "Progressing"
  hs.message = "Rolling update " .. rolling.phase
  return hs
end
if restart ~= nil and (restart.phase == "Pending" or restart.phase == "Restarting") then
  hs.status = "Progressing"
  hs.message = "Restart " .. tostring(restart.observedID) .. " " .. restart.phase
  if restart.inProgress ~= nil and restart.inProgress[1] ~= nil then
    hs.message = hs.message .. ": " .. table.concat(restart.inProgress, ", ")
  end
  return hs
end

if status.state == "successful" and (ready == nil or ready.status == "True") then
  hs.status = "Healthy"
  if message ~= "" then
    hs.message = message
  else
    hs.message = "All resources are ready"
  end
  return hs
end

-- the fine-grained Ready reasons (DGDReadyReason*, 1.4+), in words
local reasons = {
  insufficient_capacity = "Insufficient capacity",
  pods_not_ready = "Pods not ready",
  updating = "Updating",
  mixed_not_ready_reasons = "Not ready for mixed reasons",
}
local words = nil
if ready ~= nil and ready.reason ~= nil then
  words = reasons[ready.reason]
end
hs.status = "Progressing"
if words ~= nil then
  hs.message = words .. detail
else
  hs.message = tostring(status.state) .. detail
end
return hs
