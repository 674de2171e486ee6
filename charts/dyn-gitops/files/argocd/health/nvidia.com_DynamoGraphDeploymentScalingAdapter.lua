-- Argo CD health of nvidia.com/DynamoGraphDeploymentScalingAdapter (dyn-gitops; docs/argocd.md).
-- HPA, KEDA or the Planner set spec.replicas through /scale; the controller copies it to
-- status.replicas once the Deployment behind the adapter was scaled.
-- A Ready condition False -> Degraded; status.observedGeneration behind metadata.generation
-- (checked only when the controller writes it), status.replicas != spec.replicas or a
-- pendingReason -> Progressing; otherwise Healthy.
-- Plain Lua 5.1 without the string library (Argo CD's default sandbox).
local hs = {}
local status = obj.status
if status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to report status"
  return hs
end

if status.conditions ~= nil then
  for _, c in ipairs(status.conditions) do
    if c.type == "Ready" and c.status == "False" then
      hs.status = "Degraded"
      hs.message = tostring(c.message or c.reason or "Not ready")
      return hs
    end
  end
end

local generation = obj.metadata.generation
local observed = status.observedGeneration
if generation ~= nil and observed ~= nil and observed < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to observe generation " .. tostring(generation)
    .. " (observed " .. tostring(observed) .. ")"
  return hs
end

local want = 1
if obj.spec ~= nil and obj.spec.replicas ~= nil then
  want = obj.spec.replicas
end
if status.replicas == nil or status.replicas ~= want then
  hs.status = "Progressing"
  hs.message = "Scaling to " .. tostring(want) .. " replicas (now "
    .. tostring(status.replicas or 0) .. ")"
  return hs
end
if status.pendingReason ~= nil and status.pendingReason ~= "" then
  hs.status = "Progressing"
  hs.message = tostring(status.pendingReason)
  return hs
end

hs.status = "Healthy"
hs.message = tostring(want) .. " replicas"
return hs
