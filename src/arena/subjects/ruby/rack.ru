# The subject workload as a raw Rack app. Contract: ../spec.md.
require_relative "workload"

run(lambda do |env|
  status, headers, body = ArenaWorkload.call_rack(env, "rack")
  [status, headers, body.is_a?(String) ? [body] : body]
end)
