-- redis_exporter --script: the AOF fields our server adds to INFO persistence,
-- which the exporter does not map itself. The exporter runs this with EVAL on
-- every scrape and exports each returned pair as
--   redis_script_values{key="<field>", filename="..."} <value>
-- Numeric aof_fsync_*, aof_prealloc_* and aof_uring_* fields keep their INFO
-- names (counters stay counters: use rate()). aof_fsync_* times every
-- fdatasync of the AOF whichever engine ran it (posix always and everysec, the
-- io_uring engine), its histogram arriving as aof_fsync_usec_bucket_le_<usec>
-- (and _le_inf), cumulative; aof_uring_fsync_* is the same for the io_uring
-- engine only. String fields become 0/1 values:
--   aof_engine_uring            1 when the configured engine is io_uring (whether
--                               or not it started: aof_uring_active says that)
--   aof_uring_fallback          1 when io_uring was configured but could not start
--   aof_uring_fallback_reason_<reason>   1 for the reported reason (none included)
--   aof_uring_ack_<mode>        1 for the ack mode (durable or fast)
--   aof_uring_direct_declined_reason_<reason>   1 for why the last durable
--                               batch was not a direct write (none after one
--                               that was; fast_mode, past_preallocated, ...)
--   aof_prealloc_last_error_<error>      1 for the last failed extension of
--                               the preallocated region (none, enospc, edquot,
--                               eio, erofs, efbig or other)
local info = redis.call('INFO', 'persistence')
local out = {}
local function put(key, value)
  out[#out + 1] = key
  out[#out + 1] = tostring(value)
end
local function label(value)
  return (string.gsub(value, '[^%w_]', '_'))
end
local exported = {'aof_fsync_', 'aof_prealloc_', 'aof_uring_'}
local function numeric(key, value)
  if tonumber(value) == nil then
    return false
  end
  for _, prefix in ipairs(exported) do
    if string.sub(key, 1, #prefix) == prefix then
      return true
    end
  end
  return false
end
for key, value in string.gmatch(info, '([%w_]+):([^\r\n]*)') do
  if key == 'aof_engine' then
    put('aof_engine_uring', value == 'uring' and 1 or 0)
  elseif key == 'aof_uring_fallback_reason' then
    put('aof_uring_fallback', value ~= 'none' and 1 or 0)
    put('aof_uring_fallback_reason_' .. label(value), 1)
  elseif key == 'aof_uring_ack' then
    put('aof_uring_ack_' .. label(value), 1)
  elseif key == 'aof_uring_direct_declined_reason' then
    put('aof_uring_direct_declined_reason_' .. label(value), 1)
  elseif key == 'aof_prealloc_last_error' then
    put('aof_prealloc_last_error_' .. label(value), 1)
  elseif numeric(key, value) then
    put(key, value)
  end
end
return out
