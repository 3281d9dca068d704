-- wrk script for scripts/soak.sh: alternates filter and prioritize for a new pod each time (so
-- the pending-pod table keeps turning over), against the demo cluster's nodes, and paces each
-- connection to SOAK_DELAY_MS between requests for a steady rate.
local counter = 0
local delay_ms = tonumber(os.getenv("SOAK_DELAY_MS") or "10")
local nodes = '["h100-nvs-01","h100-nvs-02","dgx1-v100-01","dgx1-v100-02","a100-mig-01","a100-02","t4-01","t4-02","gpushare-01"]'
local shapes = {
  '{"nvidia.com/gpu":"1"}',
  '{"nvidia.com/gpu":"2"}',
  '{"gapless.io/gpu-memory":"8192","gapless.io/gpu-compute":"250"}',
  '{"nvidia.com/mig-1g.10gb":"1"}',
}

request = function()
  counter = counter + 1
  local name = "soak-" .. counter
  local limits = shapes[(counter % #shapes) + 1]
  local pod = '{"metadata":{"name":"' .. name .. '","namespace":"soak","uid":"uid-' .. name ..
      '"},"spec":{"containers":[{"name":"main","resources":{"limits":' .. limits .. '}}]}}'
  local body = '{"Pod":' .. pod .. ',"NodeNames":' .. nodes .. '}'
  local path = (counter % 2 == 0) and "/prioritize" or "/filter"
  return wrk.format("POST", path, {["Content-Type"] = "application/json"}, body)
end

delay = function()
  return delay_ms
end
