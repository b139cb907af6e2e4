require "logger"
require "action_controller/railtie"
require "action_view/railtie"
require "active_record/railtie"

class Blog < Rails::Application
  config.root = File.expand_path("..", __dir__)
  config.eager_load = true
  config.secret_key_base = "an-example-app-has-no-secrets"
  config.logger = Logger.new($stdout, level: Logger::WARN)
  config.log_level = :warn
  config.hosts.clear
  config.cache_store = :null_store
  config.active_record.dump_schema_after_migration = false
  # The app's own Server-Timing metrics (kept by Arena's timing around it): time in SQL and in views.
  config.middleware.insert_before 0, Class.new {
    def initialize(app) = @app = app

    def call(env)
      Thread.current[:blog_timing] = Hash.new(0.0)
      status, headers, body = @app.call(env)
      spent = Thread.current[:blog_timing]
      headers["Server-Timing"] = spent.map { |name, ms| format("%s;dur=%.3f", name, ms) }.join(", ")
      [status, headers, body]
    end
  }

  %w[sql.active_record render_template.action_view].each do |event|
    ActiveSupport::Notifications.subscribe(event) do |_name, started, finished, _id, payload|
      spent = Thread.current[:blog_timing]
      next if spent.nil? || payload[:name] == "SCHEMA"
      spent[event == "sql.active_record" ? "sql.active_record" : "view"] += (finished - started) * 1000.0
    end
  end

  # The example's data (../schema.sql), once for all workers (an advisory lock; the script is
  # idempotent). The connection is let go: forked workers open their own.
  def self.seed!
    ActiveRecord::Base.connection_pool.with_connection do |c|
      c.execute("SELECT pg_advisory_lock(72707)")
      begin
        c.execute(File.read(File.expand_path("../../schema.sql", __dir__)))
      ensure
        c.execute("SELECT pg_advisory_unlock(72707)")
      end
    end
    ActiveRecord::Base.connection_pool.disconnect!
  end
end
