-- redis_exporter --script: the io_uring AOF engine's INFO persistence fields,
-- which the exporter does not map itself. The exporter runs this with EVAL on
-- every scrape and exports each returned pair as
--   redis_script_values{key="<field>", filename="..."} <value>
-- Numeric aof_uring_* fields keep their INFO names (counters stay counters:
-- use rate()); the fsync histogram arrives as aof_uring_fsync_usec_bucket_le_<usec>
-- (and _le_inf), cumulative. String fields become 0/1 values:
--   aof_engine_uring            1 when the configured engine is io_uring (whether
--                               or not it started: aof_uring_active says that)
--   aof_uring_fallback          1 when io_uring was configured but could not start
--   aof_uring_fallback_reason_<reason>   1 for the reported reason (none included)
--   aof_uring_ack_<mode>        1 for the ack mode (durable or fast)
local info = redis.call('INFO', 'persistence')
local out = {}
local function put(key, value)
  out[#out + 1] = key
  out[#out + 1] = tostring(value)
end
for key, value in string.gmatch(info, '([%w_]+):([^\r\n]*)') do
  if key == 'aof_engine' then
    put('aof_engine_uring', value == 'uring' and 1 or 0)
  elseif key == 'aof_uring_fallback_reason' then
    put('aof_uring_fallback', value ~= 'none' and 1 or 0)
    put('aof_uring_fallback_reason_' .. string.gsub(value, '[^%w_]', '_'), 1)
  elseif key == 'aof_uring_ack' then
    put('aof_uring_ack_' .. string.gsub(value, '[^%w_]', '_'), 1)
  elseif string.sub(key, 1, 10) == 'aof_uring_' and tonumber(value) ~= nil then
    put(key, value)
  end
end
return out
