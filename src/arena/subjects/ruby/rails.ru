# The subject workload as a single-file Rails 6.1 app (Debian's ruby-rails; no Gemfile needed):
# one route per endpoint into one controller. Contract: ../spec.md.
require "tmpdir"
require "logger"
require "action_controller/railtie"
require_relative "workload"

class ArenaRails < Rails::Application
  config.root = File.join(ENV.fetch("TMPDIR", Dir.tmpdir), "arena-rails")
  config.eager_load = true
  config.secret_key_base = "arena-subject-app-has-no-secrets"
  config.logger = Logger.new($stdout, level: Logger::WARN)
  config.log_level = :warn
  config.hosts.clear
  config.api_only = true
  # RACK_LOCK=1: one request at a time in each process (Rack::Lock), as Rails ran before it was
  # thread-safe by default (Rails 3.2 without config.threadsafe!)
  config.middleware.insert_before 0, Rack::Lock if ENV["RACK_LOCK"] == "1"
end

class WorkloadController < ActionController::API
  def serve
    status, hdrs, body = ArenaWorkload.handle(request.path, request.query_string,
                                              request.headers["X-Request-Start"], "rails")
    hdrs.each { |k, v| response.headers[k] = v unless k == "Content-Type" }
    render body: body, status: status, content_type: hdrs["Content-Type"]
  end
end

# /stream with ActionController::Live, as a Rails app streams: each part written to response.stream
# as it is made. Live runs the action in a thread of its own (so X-Arena-Thread is that thread) and
# sends whatever it writes without a length, which is why only a valid /stream is routed here (the
# others, a 400 included, are WorkloadController's).
class StreamController < ActionController::API
  include ActionController::Live

  def serve
    _status, hdrs, body = ArenaWorkload.handle(request.path, request.query_string,
                                               request.headers["X-Request-Start"], "rails")
    hdrs.each { |k, v| response.headers[k] = v }
    # Rack 2.2's Rack::ETag (in Rails' middleware) gathers a body to digest it unless the answer has a
    # Last-Modified or an ETag: the workaround ActionController::Live's documentation gives (rack/rack#1619)
    response.headers["Last-Modified"] = Time.now.httpdate
    body.each { |part| response.stream.write(part) }
  ensure
    response.stream.close
  end
end

ArenaRails.initialize!
# Drawn after initialize!, whose routes reloader would otherwise clear them.
ArenaRails.routes.draw do
  (ArenaWorkload::MIX_ENDPOINTS + ["mix"]).each { |name| match "/#{name}", to: "workload#serve", via: :all }
  match "/stream", to: "stream#serve", via: :all,
                   constraints: ->(req) { ArenaWorkload.streamable?(req.query_string, req.headers["X-Request-Start"]) }
  match "/stream", to: "workload#serve", via: :all
  match "*path", to: "workload#serve", via: :all
  root to: "workload#serve", via: :all
end
run ArenaRails
