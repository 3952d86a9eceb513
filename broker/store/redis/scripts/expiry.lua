-- When a write renews the expiry of its keys (every write script starts with this file,
-- scripts/__init__.py). A questionnaire's keys and its session's used to be renewed by every
-- write, six PEXPIREs each time; now a write renews them only once their expiry is due:
-- less than retention - retention/8 away, or further than the retention (it was shortened).
-- So a questionnaire is kept from 7/8 of the retention to the whole retention after its last
-- change, and its session's keys (renewed with it, to the same expiry) outlive it.
local function renewal_due(expires, now, retention)  -- expires: ms (nil: never renewed)
  if not expires then return true end
  return expires < now + retention - math.floor(retention / 8) or expires > now + retention
end
