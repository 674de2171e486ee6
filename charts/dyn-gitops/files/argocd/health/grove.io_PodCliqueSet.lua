-- Argo CD health of grove.io/PodCliqueSet (dyn-gitops Grove path; docs/argocd.md).
-- Grove writes the status: availableReplicas counts PodCliqueSet replicas whose PodCliques
-- and scaling groups are not below their minAvailable, updatedReplicas those at the
-- current template. observedGeneration behind metadata.generation -> Progressing; a
-- MinAvailableBreached condition True -> Degraded; all replicas available and updated ->
-- Healthy; otherwise Progressing.
-- Plain Lua 5.1 without the string library (Argo CD's default sandbox).
local hs = {}
local status = obj.status
if status == nil or status.observedGeneration == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for Grove to report status"
  return hs
end

local generation = obj.metadata.generation
if generation ~= nil and status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for Grove to observe generation " .. tostring(generation)
    .. " (observed " .. tostring(status.observedGeneration) .. ")"
  return hs
end

if status.conditions ~= nil then
  for _, c in ipairs(status.conditions) do
    if c.type == "MinAvailableBreached" and c.status == "True" then
      hs.status = "Degraded"
      hs.message = tostring(c.message or c.reason or "MinAvailable breached")
      return hs
    end
  end
end

local want = 0
if obj.spec ~= nil and obj.spec.replicas ~= nil then
  want = obj.spec.replicas
end
local available = status.availableReplicas or 0
local updated = status.updatedReplicas or 0
if available >= want and updated >= want then
  hs.status = "Healthy"
  hs.message = tostring(available) .. "/" .. tostring(want) .. " replicas available"
  return hs
end

hs.status = "Progressing"
hs.message = tostring(available) .. "/" .. tostring(want) .. " replicas available, "
  .. tostring(updated) .. " updated"
return hs
