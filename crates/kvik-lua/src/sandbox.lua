-- kvik-lua sandbox: runs once per Lua state, with the whole standard library still in reach,
-- before any script. It installs the libraries the Rust side built (each function following
-- the (ok, ...) convention of args.rs), Redis's error handler, and Redis 7.0's protections:
-- every global and library table is read-only ("Attempt to modify a readonly table") and a
-- missing global is an error. Lua 5.1 has no read-only tables, so each protected table is an
-- empty proxy whose __newindex refuses; the raw-access builtins see through the proxies.
local K = ...
local B = _G
local dbg = debug
local error, type, tostring, xpcall = error, type, tostring, xpcall
local o_rawset, o_rawget, o_next, o_pairs = rawset, rawget, next, pairs
local o_setmetatable, o_getmetatable, setfenv = setmetatable, getmetatable, setfenv
local GLUE = dbg.getinfo(1, 'S').source

local take = K.take_raised

-- Redis's __redis__err__handler: errors become {err=...} tables that remember where the
-- script was. Frames of C functions and of this file are skipped, as Redis skips its C ones.
local function handler(err)
  err = take(err)
  if K.killed() then err = {err = K.kill_message()} end
  local level = 2
  local i = dbg.getinfo(level, 'Sl')
  while i and (i.what == 'C' or i.what == 'tail' or i.source == GLUE) do
    level = level + 1
    i = dbg.getinfo(level, 'Sl')
  end
  if type(err) ~= "table" then err = {err = "ERR " .. tostring(err)} end
  if i then
    err.source = i.source
    err.line = i.currentline
  end
  return err
end

K.run = function(f, keys, args)
  if keys then
    return xpcall(function() return f(keys, args) end, handler)
  end
  return xpcall(f, handler)
end

-- Libraries.
for name, lib in o_pairs(K.libs) do
  local t = {}
  for k, v in o_pairs(lib) do
    t[k] = v
  end
  B[name] = t
end
B.table.insert = K.table_insert
B.math.random = K.random
B.math.randomseed = K.randomseed
-- Redis 7.0's pcall hands back the text of an {err=...} error rather than the table.
local o_pcall, select, unpack = pcall, select, unpack
local function pack(...) return select('#', ...), {...} end
B.pcall = function(...)
  -- Redis's pcall calls its own result placeholder when given nothing.
  if select('#', ...) == 0 then return false, 'attempt to call a boolean value' end
  local n, r = pack(o_pcall(...))
  if not r[1] then
    local e = take(r[2])
    -- A killed script must not survive by catching the kill.
    if K.killed() then error(e, 0) end
    if type(e) == 'table' and type(o_rawget(e, 'err')) == 'string' then e = e.err end
    r[2] = e
  end
  return unpack(r, 1, n)
end
for _, name in ipairs({'debug', 'loadfile', 'dofile', 'print', 'getfenv', 'setfenv',
    'newproxy', 'module', 'require', 'package', 'os', 'io'}) do
  B[name] = nil
end
B.__redis__err__handler = handler

-- Errors raised by the Rust libraries travel as opaque values: handlers and coroutine
-- callers get the real value back.
local o_xpcall = xpcall
B.xpcall = function(f, h, ...)
  local handler = h
  if type(h) == 'function' then handler = function(e) return h(take(e)) end end
  local n, r = pack(o_xpcall(f, handler, ...))
  if not r[1] and K.killed() then error(r[2], 0) end
  return unpack(r, 1, n)
end
local co = B.coroutine
local o_resume = co.resume
co.resume = function(...)
  local n, r = pack(o_resume(...))
  if not r[1] then r[2] = take(r[2]) end
  return unpack(r, 1, n)
end

-- Read-only protection.
local real = o_setmetatable({}, {__mode = 'k'})
K.real = real
local view = o_setmetatable({}, {__mode = 'k'})
local function readonly() error('Attempt to modify a readonly table', 2) end
local function protect(t)
  local p = {}
  real[p] = t
  o_setmetatable(p, {__index = t, __newindex = readonly})
  return p
end
for _, name in ipairs({'string', 'math', 'table', 'coroutine', 'redis', 'cjson', 'bit',
    'struct', 'cmsgpack'}) do
  if o_rawget(B, name) then B[name] = protect(B[name]) end
end
local smt = o_getmetatable('')
smt.__index = B.string
smt.__metatable = protect(smt)

local function missing(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end
local next = function(t, ...)
  local r = real[t]
  if r then return o_next(r, ...) end
  return o_next(t, ...)
end
B.next = next
B.pairs = function(t, ...)
  if real[t] then return next, t, nil end
  return o_pairs(t, ...)
end
B.rawget = function(t, ...)
  local r = real[t]
  if r then return o_rawget(r, ...) end
  return o_rawget(t, ...)
end
B.rawset = function(t, ...)
  if real[t] then error('Attempt to modify a readonly table', 0) end
  return o_rawset(t, ...)
end
B.setmetatable = function(t, ...)
  if real[t] then error('Attempt to modify a readonly table', 0) end
  return o_setmetatable(t, ...)
end
B.getmetatable = function(t, ...)
  if real[t] then return view[t] end
  return o_getmetatable(t, ...)
end
local G = protect(B)
view[G] = protect({__index = missing})
B._G = G
o_setmetatable(B, {__index = missing})
-- Functions: while FUNCTION LOAD runs a library, its globals are only Redis's library API.
if K.register_function then
  local api = {register_function = K.register_function, log = B.redis.log}
  for _, name in ipairs({'LOG_DEBUG', 'LOG_VERBOSE', 'LOG_NOTICE', 'LOG_WARNING',
      'REDIS_VERSION', 'REDIS_VERSION_NUM'}) do
    api[name] = B.redis[name]
  end
  local load_globals = o_setmetatable({redis = protect(api)}, {__index = missing})
  local gmt = o_getmetatable(G)
  K.loading = function(on) gmt.__index = on and load_globals or B end
end
setfenv(0, G)
return B
