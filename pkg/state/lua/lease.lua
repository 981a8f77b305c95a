-- Claims a lease (claim).
-- uses fn/claim.lua
-- KEYS[1] lease  the lease
-- ARGV[1] owner  who claims it
-- ARGV[2] ttl    ms
-- Returns 0 when owner holds the lease, else the ms the holder has left.

return claim(KEYS[1], ARGV[1], ARGV[2])
