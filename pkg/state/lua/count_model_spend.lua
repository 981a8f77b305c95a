-- Adds an ended job to its tenant's spend per model of a day (countModelSpend).
-- uses fn/count_model_spend.lua
-- KEYS[1] day       the tenant's spend per model of the day
-- ARGV[1] spent     what the job's spend ledger held, micro-dollars
-- ARGV[2..7]        usd field, jobs field, searches field, the job's searches, its
--                   usage's micro-dollars, the day's TTL s (0: not now)

countModelSpend(KEYS[1], ARGV[1], {ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]})
return 1
