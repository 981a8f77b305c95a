-- A call's entry in a tenant's day ledger is "micros:searches", with ":p" after it
-- while it is a turn's reservation not yet settled. parse(v) reads one: micros,
-- searches, pending. move(dk, mk, pu, pn, cu, cn) moves the day dk's and the month
-- mk's counters from an entry's micros pu and searches pn to cu and cn.
local function parse(v)
  local p, n, pend = string.match(v, '^(-?%d+):(%d+)(:?p?)$')
  return tonumber(p), tonumber(n), pend == ':p'
end
local function move(dk, mk, pu, pn, cu, cn)
  if cu ~= pu then
    redis.call('HINCRBY', dk, 'usd', cu - pu)
    redis.call('HINCRBY', mk, 'usd', cu - pu)
  end
  if cn ~= pn then
    redis.call('HINCRBY', dk, 'n', cn - pn)
    redis.call('HINCRBY', mk, 'n', cn - pn)
  end
end
